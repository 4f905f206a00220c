package main

// peerTargets are the other gateways, fronting the same child.
func peerTargets(node, dir string) []target {
	return []target{mcpProxyTarget(node, dir), supergatewayTarget(node, dir)}
}

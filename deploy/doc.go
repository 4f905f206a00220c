// Package deploy holds the tests of the container image and the Kubernetes
// manifests at the root of the repository: the Dockerfile, parsed with
// BuildKit's own parser and built as written, and k8s/, decoded strictly
// into the Kubernetes API types and rendered with kustomize. It is a module
// of its own so that the gateway's module does not depend on either.
package deploy

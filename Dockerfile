# The gateway, and beside it the runtime of the stdio MCP server it runs as
# its child: here @modelcontextprotocol/server-everything on Node.js.
#
#   docker build -t stdiomcp/gateway:0.1.0 .
#   docker run --rm -p 8080:8080 --stop-timeout 45 stdiomcp/gateway:0.1.0
#
# deploy/ checks this file (go test ./... there).

# The gateway: a static binary (no cgo), so any runtime base can take it.
# The Go of go.mod's go line: golang images do not fetch another toolchain.
FROM golang:1.26.8 AS build
WORKDIR /src
# The modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway

# The runtime is the child's. For a Python server start from a python:*-slim
# image and pip install it; for a server that is a static binary, from
# debian:bookworm-slim with the binary copied in. Keep tini, the user and
# everything from ENTRYPOINT down.
FROM node:22-bookworm-slim AS runtime
# tini is PID 1: it passes SIGTERM on to the gateway and reaps the orphans
# a child leaves behind (a wrapper script's server, say), which no one else
# would wait for. ca-certificates: the gateway checks an https peer (the
# OAuth issuer and its keys) against the system's roots, which the node
# image removes once Node is fetched (Node carries its own).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The child, at the version the interop tests pin (interop/package.json);
# its own dependencies resolve within their ranges at build time.
RUN npm install --global --no-audit --no-fund @modelcontextprotocol/server-everything@2026.8.31 \
 && npm cache clean --force
# A numeric user, so that Kubernetes' runAsNonRoot can verify it. HOME is
# for children that write there (npm's cache, for one).
RUN groupadd --gid 10001 gateway \
 && useradd --uid 10001 --gid 10001 --home-dir /home/gateway --create-home --shell /usr/sbin/nologin gateway
COPY --from=build /out/gateway /usr/local/bin/gateway
ENV HOME=/home/gateway \
    GATEWAY_ADDR=:8080 \
    GATEWAY_COMMAND="mcp-server-everything stdio"
USER 10001:10001
WORKDIR /home/gateway
EXPOSE 8080
# The gateway drains on SIGTERM: /readyz turns 503, calls in flight get
# GATEWAY_SHUTDOWN_GRACE. Give it that and more (docker stop -t 45).
STOPSIGNAL SIGTERM
# Liveness, not readiness: /readyz is 503 during the drain, which is no fault.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/gateway", "healthcheck", "-timeout", "3s"]
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/gateway"]

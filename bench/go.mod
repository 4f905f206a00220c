module github.com/stdiomcp/gateway/bench

go 1.26.8

require (
	golang.org/x/image v0.48.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.44.0 // indirect

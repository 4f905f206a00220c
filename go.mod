module github.com/stdiomcp/gateway

go 1.26.8

require go.uber.org/goleak v1.3.0

require (
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/kelseyhightower/envconfig v1.4.0 // indirect
)

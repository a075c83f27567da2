module github.com/qualbox/qualbox/sandboxapi

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	gotest.tools/v3 v3.5.2
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

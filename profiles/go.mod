module github.com/qualbox/qualbox/profiles

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	go.yaml.in/yaml/v3 v3.0.6
	gotest.tools/v3 v3.5.2
)

module github.com/qualbox/qualbox/sandboxapi

go 1.26

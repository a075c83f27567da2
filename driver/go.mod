module github.com/qualbox/qualbox/driver

go 1.26

module github.com/qualbox/qualbox/profiles

go 1.26

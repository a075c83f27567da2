module github.com/qualbox/qualbox/qualify

go 1.26

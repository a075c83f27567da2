module github.com/qualbox/qualbox

go 1.26

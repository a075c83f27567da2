package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/qualbox/qualbox/internal/release"
)

func main() {
	arch := flag.String("arch", "", "the image's GOARCH, amd64 or arm64")
	busybox := flag.String("busybox", "", "static busybox `FILE` for -arch")
	probe := flag.String("probe", "", "static probe `FILE` for -arch")
	out := flag.String("out", "", "archive `FILE` to write")
	flag.Parse()
	if *arch == "" || *busybox == "" || *probe == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: guestarchive -arch amd64|arm64 -busybox FILE -probe FILE -out FILE")
		os.Exit(2)
	}
	id, err := release.WriteImage(*out, *busybox, *probe, *arch)
	if err != nil {
		fmt.Fprintf(os.Stderr, "guestarchive: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(id)
}

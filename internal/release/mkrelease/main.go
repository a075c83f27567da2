package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qualbox/qualbox/internal/release"
)

func main() {
	version := flag.String("version", "", "release `VERSION`: a module version (v1.2.0, v1.2.0-rc.1) or git describe output without a tag (93d924b-dirty becomes v0.0.0-g93d924b-dirty)")
	out := flag.String("out", "dist", "output `DIR`")
	root := flag.String("root", ".", "repository `DIR` to pack")
	busybox := map[string]*string{
		"amd64": flag.String("busybox-amd64", "", "static busybox `FILE` for the linux/amd64 guest image archive (none: no archive)"),
		"arm64": flag.String("busybox-arm64", "", "static busybox `FILE` for the linux/arm64 guest image archive (none: no archive)"),
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mkrelease: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	v, err := release.Version(*version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkrelease: %v\n", err)
		os.Exit(2)
	}
	bb := map[string]string{}
	for arch, f := range busybox {
		if *f != "" {
			bb[arch] = *f
		}
	}
	if err := run(*root, *out, v, bb); err != nil {
		fmt.Fprintf(os.Stderr, "mkrelease: %v\n", err)
		os.Exit(1)
	}
}

func run(root, out, version string, busybox map[string]string) error {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	names, err := release.Build(release.Options{Root: absRoot, Version: version, Out: absOut, Busybox: busybox, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s: %d files and %s in %s\n", release.Module, version, len(names), release.SumsFile, out)
	return nil
}

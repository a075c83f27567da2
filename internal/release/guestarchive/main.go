// Command guestarchive writes one guest image archive (the docker-archive
// tar `qualify run --image-archive` loads, as make release writes them)
// from a static busybox and a static probe of one architecture. Lane D
// uses it for the emulated architecture's image (docs/lanes.md#lane-d).
//
// Usage:
//
//	guestarchive -arch amd64|arm64 -busybox FILE -probe FILE -out FILE
//
// It prints the image ID. The archive is written to a temporary file
// beside -out and renamed into place only when complete. Exit status 2 for
// a usage error, 1 for any other.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qualbox/qualbox/qualify/guest"
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
	if err := run(*arch, *busybox, *probe, *out); err != nil {
		fmt.Fprintf(os.Stderr, "guestarchive: %v\n", err)
		os.Exit(1)
	}
}

func run(arch, busybox, probe, out string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	pb, err := os.ReadFile(probe)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	id, err := guest.WriteArchive(&buf, guest.ArchiveOptions{Busybox: bb, Probe: pb, Architecture: arch})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".guestarchive-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	fmt.Println(id)
	return nil
}

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

package profiles_test

import (
	"fmt"

	"github.com/qualbox/qualbox/profiles"
)

func ExampleLoad() {
	p, err := profiles.Load("linux-x64-cgroupv1")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.BackendRevision)
	fmt.Println(p.Cgroup.Version, p.Cgroup.Driver, p.Seccomp.SecurityOptions)

	_, err = profiles.Load("linux-x64-cgroupv3")
	fmt.Println(err)
	// Output:
	// engine-1.41-v1-linux-x64-cgroupv1
	// 1 cgroupfs [name=seccomp,profile=default name=seccomp,profile=builtin]
	// profiles: unknown profile "linux-x64-cgroupv3" (known: desktop-apple-virtualization-native-arm64, desktop-apple-virtualization-rosetta-amd64, linux-arm64, linux-arm64-cgroupfs, linux-arm64-emulated-amd64, linux-x64, linux-x64-cgroupv1)
}

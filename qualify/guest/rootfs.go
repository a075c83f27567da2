package guest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"path"
	"time"
)

// epoch is every entry's modification time, so that the layer content
// depends only on the binaries.
var epoch = time.Unix(0, 0).UTC()

// rootfs returns a function writing the guest root filesystem as a tar
// stream:
//
//	/bin/busybox (0755) and /bin/<applet> -> busybox symlinks
//	/usr/local/bin/qualbox-probe (0755)
//	/etc/passwd, /etc/group: root 0:0 and sandbox 65534:65534
//	/tmp 1777; /home/sandbox 0700 sandbox; /workspace 0755 root
//	/dev /proc /sys /etc /root /usr/bin /usr/sbin /sbin /var: root 0755
//
// /tmp and /home/sandbox are tmpfs mount points in the driver's workload and
// /workspace the volume mount point; the driver prepares /workspace/work.
func rootfs(busybox, probe []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		tw := tar.NewWriter(w)
		dir := func(name string, mode int64, uid, gid int) error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX})
		}
		file := func(name string, mode int64, data []byte) error {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
			_, err := tw.Write(data)
			return err
		}
		for _, d := range []struct {
			name     string
			mode     int64
			uid, gid int
		}{
			{"bin", 0o755, 0, 0},
			{"dev", 0o755, 0, 0},
			{"etc", 0o755, 0, 0},
			{"home", 0o755, 0, 0},
			{"home/sandbox", 0o700, SandboxUID, SandboxGID},
			{"proc", 0o755, 0, 0},
			{"root", 0o700, 0, 0},
			{"sbin", 0o755, 0, 0},
			{"sys", 0o755, 0, 0},
			{"tmp", 0o1777, 0, 0},
			{"usr", 0o755, 0, 0},
			{"usr/bin", 0o755, 0, 0},
			{"usr/local", 0o755, 0, 0},
			{"usr/local/bin", 0o755, 0, 0},
			{"usr/sbin", 0o755, 0, 0},
			{"var", 0o755, 0, 0},
			{"workspace", 0o755, 0, 0},
		} {
			if err := dir(d.name, d.mode, d.uid, d.gid); err != nil {
				return err
			}
		}
		if err := file(BusyboxPath[1:], 0o755, busybox); err != nil {
			return err
		}
		for _, a := range Applets {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: path.Join("bin", a), Linkname: "busybox", Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		if err := file(ProbePath[1:], 0o755, probe); err != nil {
			return err
		}
		passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:sandbox:/home/sandbox:/bin/sh\n", SandboxUID, SandboxGID)
		group := fmt.Sprintf("root:x:0:\nsandbox:x:%d:\n", SandboxGID)
		if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
			return err
		}
		if err := file("etc/group", 0o644, []byte(group)); err != nil {
			return err
		}
		return tw.Close()
	}
}

// machines maps GOARCH to the ELF machine of its executables.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic reports whether b is a statically linked ELF executable for
// arch: no PT_INTERP program header (no dynamic loader) and no PT_DYNAMIC
// with needed libraries.
func checkStatic(b []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != machines[arch] {
		return fmt.Errorf("ELF machine %v, want %v for %s", f.Machine, machines[arch], arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (has PT_INTERP), want a static executable")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %q, want a static executable", libs)
	}
	return nil
}

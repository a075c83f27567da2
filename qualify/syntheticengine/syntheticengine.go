package syntheticengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/system"
)

// Marker is the sentence every piece of evidence produced against this
// server carries.
const Marker = "synthetic: no Docker Desktop ran"

// Shape is one recorded Engine: what /version, /info and image inspect
// return.
type Shape struct {
	// Name identifies the shape, for example "desktop-native-arm64" or
	// "rootless".
	Name string
	// Description says what the shape changes, in a sentence.
	Description string
	// Version is the /version reply.
	Version system.VersionResponse
	// Info is the /info reply.
	Info system.Info
	// Images maps exact image IDs to their inspect replies; other IDs are
	// 404.
	Images map[string]image.InspectResponse
}

// Clone returns a deep copy of s so a variant can change it freely.
func (s Shape) Clone() Shape {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var c Shape
	if err := json.Unmarshal(data, &c); err != nil {
		panic(err)
	}
	return c
}

// Server serves one Shape on a Unix socket.
type Server struct {
	socket string
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}

	mu       sync.Mutex
	shape    Shape
	requests []string
}

// Start listens on <dir>/synthetic-engine.sock (dir must exist and the
// socket path must fit a sockaddr_un, about 100 bytes) and serves shape
// until Close.
func Start(dir string, shape Shape) (*Server, error) {
	socket := filepath.Join(dir, "synthetic-engine.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("syntheticengine: listen: %w", err)
	}
	s := &Server{socket: socket, ln: ln, shape: shape, done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Socket returns the socket's absolute path.
func (s *Server) Socket() string { return s.socket }

// Endpoint returns "unix://" and the socket path.
func (s *Server) Endpoint() string { return "unix://" + s.socket }

// SetShape replaces the served shape; later requests see the new one.
func (s *Server) SetShape(shape Shape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shape = shape
}

// Requests returns every request received so far, "METHOD /path", in
// order, API version prefixes included.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if rmErr := os.Remove(s.socket); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}

var (
	versionPrefix = regexp.MustCompile(`^/v\d+\.\d+(/.*)$`)
	imageInspect  = regexp.MustCompile(`^/images/(.+)/json$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	shape := s.shape
	s.mu.Unlock()

	p := r.URL.Path
	if m := versionPrefix.FindStringSubmatch(p); m != nil {
		p = m[1]
	}
	w.Header().Set("Api-Version", shape.Version.APIVersion)
	w.Header().Set("Ostype", shape.Info.OSType)
	w.Header().Set("Server", "Docker/"+shape.Version.Version+" (synthetic)")
	switch {
	case p == "/_ping" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte("OK"))
		}
	case p == "/version" && r.Method == http.MethodGet:
		reply(w, http.StatusOK, shape.Version)
	case p == "/info" && r.Method == http.MethodGet:
		reply(w, http.StatusOK, shape.Info)
	case imageInspect.MatchString(p) && r.Method == http.MethodGet:
		id := imageInspect.FindStringSubmatch(p)[1]
		if img, ok := shape.Images[id]; ok {
			reply(w, http.StatusOK, img)
			return
		}
		reply(w, http.StatusNotFound, map[string]string{"message": "No such image: " + id})
	default:
		reply(w, http.StatusNotImplemented, map[string]string{
			"message": fmt.Sprintf("synthetic Engine replays admission only: %s %s is not served", r.Method, r.URL.Path),
		})
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Image IDs of the synthetic workload images: Docker Desktop on Apple
// Silicon runs linux/arm64 images natively and linux/amd64 ones through
// Rosetta.
const (
	ImageArm64 = "sha256:a11ce5a1a0000000000000000000000000000000000000000000000000000064"
	ImageAmd64 = "sha256:a11ce5a1a0000000000000000000000000000000000000000000000000000086"
)

// desktopInfo is /info of Docker Desktop on Apple Silicon with the Apple
// Virtualization framework: a linuxkit arm64 VM with cgroup v2 but the
// cgroupfs driver, no AppArmor, the builtin seccomp profile, cgroupns, and
// the containerd image store.
func desktopInfo() system.Info {
	return system.Info{
		ID:                 "5c9e1e0b-7d0c-4c59-9a5c-2d0f4d7f0a11",
		Containers:         0,
		Images:             2,
		Driver:             "overlayfs",
		DriverStatus:       [][2]string{{"driver-type", "io.containerd.snapshotter.v1"}},
		MemoryLimit:        true,
		SwapLimit:          true,
		CPUCfsPeriod:       true,
		CPUCfsQuota:        true,
		CPUShares:          true,
		CPUSet:             true,
		PidsLimit:          true,
		IPv4Forwarding:     true,
		CgroupDriver:       "cgroupfs",
		CgroupVersion:      "2",
		KernelVersion:      "6.10.14-linuxkit",
		OperatingSystem:    "Docker Desktop",
		OSVersion:          "",
		OSType:             "linux",
		Architecture:       "aarch64",
		IndexServerAddress: "https://index.docker.io/v1/",
		NCPU:               8,
		MemTotal:           8 << 30,
		DockerRootDir:      "/var/lib/docker",
		Name:               "docker-desktop",
		ServerVersion:      "29.1.4",
		DefaultRuntime:     "runc",
		// The commits of the containerd and runc releases /version names
		// (as lane D's real 29.1.4 tuple reports them).
		ContainerdCommit: system.Commit{ID: "301b2dac98f15c27117da5c8af12118a041a31d9"},
		RuncCommit:       system.Commit{ID: "d6d73eb8c60246978da649ffe75ce5c8bca8f856"},
		InitCommit:       system.Commit{ID: "de40ad0"},
		InitBinary:       "docker-init",
		SecurityOptions:  []string{"name=seccomp,profile=builtin", "name=cgroupns"},
		CDISpecDirs:      []string{},
		Warnings:         nil,
	}
}

func desktopVersion() system.VersionResponse {
	details := map[string]string{
		"ApiVersion": "1.52", "Arch": "arm64", "BuildTime": "2026-01-13T00:00:00.000000000+00:00",
		"Experimental": "false", "GitCommit": "08440b6", "GoVersion": "go1.25.5",
		"KernelVersion": "6.10.14-linuxkit", "MinAPIVersion": "1.44", "Os": "linux",
	}
	return system.VersionResponse{
		Platform:      system.PlatformInfo{Name: "Docker Desktop 4.56.0 (synthetic)"},
		Version:       "29.1.4",
		APIVersion:    "1.52",
		MinAPIVersion: "1.44",
		Os:            "linux",
		Arch:          "arm64",
		Components: []system.ComponentVersion{
			{Name: "Engine", Version: "29.1.4", Details: details},
			{Name: "containerd", Version: "v2.2.2", Details: map[string]string{"GitCommit": "301b2dac98f15c27117da5c8af12118a041a31d9"}},
			{Name: "runc", Version: "1.3.4", Details: map[string]string{"GitCommit": "d6d73eb8c60246978da649ffe75ce5c8bca8f856"}},
			{Name: "docker-init", Version: "0.19.0", Details: map[string]string{"GitCommit": "de40ad0"}},
		},
		GitCommit:     "08440b6",
		GoVersion:     "go1.25.5",
		KernelVersion: "6.10.14-linuxkit",
		BuildTime:     "2026-01-13T00:00:00.000000000+00:00",
	}
}

func workloadImage(id, arch string) image.InspectResponse {
	return image.InspectResponse{
		ID: id, Os: "linux", Architecture: arch,
		Config: nil,
		RootFS: image.RootFS{Type: "layers", Layers: []string{"sha256:" + strings.Repeat("0", 64)}},
	}
}

// Desktop returns the shape of a Docker Desktop daemon on Apple Silicon
// (arm64 VM, Engine 29.1.4, API 1.52) holding one arm64 workload image
// (ImageArm64, for the native profile) and one amd64 image (ImageAmd64,
// for the Rosetta profile). The daemon is the same for both Desktop
// profiles; they differ in the workload image's architecture.
func Desktop() Shape {
	return Shape{
		Name:        "desktop",
		Description: "Docker Desktop on Apple Silicon: arm64 VM, cgroup v2 with cgroupfs, no AppArmor, builtin seccomp, cgroupns, containerd image store",
		Version:     desktopVersion(),
		Info:        desktopInfo(),
		Images: map[string]image.InspectResponse{
			ImageArm64: workloadImage(ImageArm64, "arm64"),
			ImageAmd64: workloadImage(ImageAmd64, "amd64"),
		},
	}
}

// Variant is a named change of the Desktop shape.
type Variant struct {
	// Name identifies the variant, for example "rootless".
	Name string
	// Description says what changed.
	Description string
	// Apply changes a clone of the Desktop shape.
	Apply func(*Shape)
}

// Shape returns the Desktop shape with v applied.
func (v Variant) Shape() Shape {
	s := Desktop().Clone()
	if v.Apply != nil {
		v.Apply(&s)
	}
	s.Name, s.Description = v.Name, v.Description
	return s
}

func addSecurityOption(opt string) func(*Shape) {
	return func(s *Shape) { s.Info.SecurityOptions = append(s.Info.SecurityOptions, opt) }
}

// Variants returns the Desktop shape itself ("desktop") followed by the
// negative shapes: rootless, userns, each missing controller flag, another
// daemon architecture, the systemd cgroup driver, AppArmor present, cgroup
// v1, no builtin seccomp, no cgroupns, an Engine that is not Docker
// Desktop, API below 1.52, MinAPIVersion above 1.52, and no image at all.
// Which image architecture a profile needs is the caller's choice of image
// ID (ImageArm64 or ImageAmd64), so the wrong-image-architecture case needs
// no variant.
func Variants() []Variant {
	return []Variant{
		{Name: "desktop", Description: "Docker Desktop on Apple Silicon as recorded"},
		{Name: "rootless", Description: "rootless daemon: SecurityOptions gains name=rootless",
			Apply: addSecurityOption("name=rootless")},
		{Name: "userns", Description: "user-namespace remapping: SecurityOptions gains name=userns",
			Apply: addSecurityOption("name=userns")},
		{Name: "no-memory-limit", Description: "/info MemoryLimit false", Apply: func(s *Shape) { s.Info.MemoryLimit = false }},
		{Name: "no-swap-limit", Description: "/info SwapLimit false", Apply: func(s *Shape) { s.Info.SwapLimit = false }},
		{Name: "no-pids-limit", Description: "/info PidsLimit false", Apply: func(s *Shape) { s.Info.PidsLimit = false }},
		{Name: "no-cpu-cfs-period", Description: "/info CpuCfsPeriod false", Apply: func(s *Shape) { s.Info.CPUCfsPeriod = false }},
		{Name: "no-cpu-cfs-quota", Description: "/info CpuCfsQuota false", Apply: func(s *Shape) { s.Info.CPUCfsQuota = false }},
		{Name: "amd64-daemon", Description: "an amd64 daemon (Intel Mac or Docker VMM on x86): /version Arch amd64, /info Architecture x86_64",
			Apply: func(s *Shape) { s.Version.Arch = "amd64"; s.Info.Architecture = "x86_64" }},
		{Name: "systemd-cgroup-driver", Description: "/info CgroupDriver systemd", Apply: func(s *Shape) { s.Info.CgroupDriver = "systemd" }},
		{Name: "apparmor", Description: "AppArmor present: SecurityOptions gains name=apparmor",
			Apply: addSecurityOption("name=apparmor")},
		{Name: "cgroup-v1", Description: "/info CgroupVersion 1", Apply: func(s *Shape) { s.Info.CgroupVersion = "1" }},
		{Name: "no-builtin-seccomp", Description: "seccomp unconfined: SecurityOptions without name=seccomp,profile=builtin",
			Apply: func(s *Shape) { s.Info.SecurityOptions = []string{"name=seccomp,profile=unconfined", "name=cgroupns"} }},
		{Name: "no-cgroupns", Description: "SecurityOptions without name=cgroupns",
			Apply: func(s *Shape) { s.Info.SecurityOptions = []string{"name=seccomp,profile=builtin"} }},
		{Name: "not-desktop", Description: "a Linux Engine on arm64 that is not Docker Desktop: OperatingSystem Ubuntu 24.04.3 LTS",
			Apply: func(s *Shape) { s.Info.OperatingSystem = "Ubuntu 24.04.3 LTS" }},
		{Name: "api-1.51", Description: "API below 1.52: /version ApiVersion 1.51",
			Apply: func(s *Shape) { s.Version.APIVersion = "1.51" }},
		{Name: "min-api-1.53", Description: "MinAPIVersion above 1.52: /version MinAPIVersion 1.53",
			Apply: func(s *Shape) { s.Version.MinAPIVersion = "1.53" }},
		{Name: "no-images", Description: "neither workload image is present", Apply: func(s *Shape) { s.Images = nil }},
	}
}

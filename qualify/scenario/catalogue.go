package scenario

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// CatalogueVersion identifies the meaning of the scenario catalogue's
// checks. Bump it in the same commit as any change that makes a scenario
// check more (or differently): a release gate can then require reports of
// at least this version (docs/qualification.md#gate). Version 1 is every
// report made before reports carried a harness identity; version 2 the
// first catalogue that recorded one; version 3 adds datasets and
// desktop-admission and the lost-engine-replies check that the Engine
// handled the create whose reply was lost; version 4 has pid-exhaustion
// read the sandbox's own refusals from pids.events.local where the kernel
// has it (Linux 6.11 and later, whose pids.events is hierarchical);
// version 5 has isolation check the workload's uname(2) machine against
// the profile's image architecture (aarch64 on an arm64 row, x86_64 on an
// emulated amd64 one) and admission's asController; version 6 samples the
// observer's time series during memory-exhaustion, pid-exhaustion,
// tmpfs-bounds and descendant-containment and checks that it reached the
// limit; version 7 has datasets require the driver's typed subpath
// refusal, which names no Engine host path, and the series checks count
// readable samples and judge memory by the kernel's high-water mark;
// version 8 has network-isolation look for an Engine API reachable from
// the outbound sandbox (failing if one answers) and record whether the
// cloud metadata address answers, and tmpfs-bounds judge its series by
// the memory usage's level rather than its rise; version 9 has
// network-isolation probe every host address and the default bridge's
// gateway over HTTP and TLS one at a time and require the network's
// gateway, tmpfs-bounds judge its series' rise less the per-CPU charge
// batches, and isolation check that the sandbox cannot create a user
// namespace and record its seccomp filters and the host's user namespace
// sysctls; version 10 adds warm-pool (a pool's distinct acquisitions with
// fresh workspaces, its idle expiry, its recovery after its controller's
// death, its refusal of a sandbox whose daemon changed, and its Close)
// and caps tmpfs-bounds' allowance for per-CPU charge batches at half of
// what was written, so that a host with many CPUs or large pages cannot
// make its series check unable to fail; version 11 adds engine-restart:
// the Engine daemon restarted by the manifest's command under persisted
// idle, busy and stopped sandboxes (live-restore off, and on where the
// manifest gives a restart into it), checked to have restarted, each
// record reconciled matched by a fresh controller and destroyed from it
// with nothing left, and a dataset mounted by subpath after the restart
// reading the image's content.
const CatalogueVersion = 11

// sources are this package's Go files, embedded so that every build knows
// the digest of the scenario code it runs, with or without VCS stamping.
//
//go:embed *.go
var sources embed.FS

// CatalogueSHA256 is the hex SHA-256 over this package's non-test Go
// sources: for each file in name order, its name, a NUL, its length in
// decimal, a NUL and its bytes. Any edit of a scenario changes it.
var CatalogueSHA256 = catalogueDigest(sources)

func catalogueDigest(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "*.go")
	if err != nil {
		panic(err) // the pattern is valid
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		h.Write([]byte(n + "\x00"))
		h.Write([]byte(strconv.Itoa(len(data)) + "\x00"))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

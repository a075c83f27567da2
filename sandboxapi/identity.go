package sandboxapi

import "unicode/utf8"

// Namespace separates one application's sandboxes from another's. It is a
// non-empty identity of at most MaxNamespaceBytes with no whitespace,
// control characters, '/' or '\'.
type Namespace string

// SandboxID identifies one sandbox (at most MaxIdentityBytes, same alphabet).
type SandboxID string

// ProcessID identifies one sandbox process (at most MaxIdentityBytes).
type ProcessID string

// ValidIdentity reports whether s is a bounded identity in the contract's
// sense (docs/contract.md#policy): non-empty, valid UTF-8, at most max bytes,
// and free of ASCII control characters, space, DEL, '/' and '\'.
func ValidIdentity(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c == 0x7f || c == '/' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseNamespace validates s as a Namespace (at most MaxNamespaceBytes, see
// ValidIdentity). It returns a *ValidationError whose
// single issue has an empty path.
func ParseNamespace(s string) (Namespace, error) {
	if !ValidIdentity(s, MaxNamespaceBytes) {
		return "", rootIssue("expected a namespace of 1 to %d bytes without whitespace, control characters or separators", MaxNamespaceBytes)
	}
	return Namespace(s), nil
}

// ParseSandboxID validates s as a SandboxID (at most MaxIdentityBytes). It
// returns a *ValidationError on failure.
func ParseSandboxID(s string) (SandboxID, error) {
	if !ValidIdentity(s, MaxIdentityBytes) {
		return "", rootIssue("expected a sandbox ID of 1 to %d bytes without whitespace, control characters or separators", MaxIdentityBytes)
	}
	return SandboxID(s), nil
}

// ParseProcessID validates s as a ProcessID (at most MaxIdentityBytes). It
// returns a *ValidationError on failure.
func ParseProcessID(s string) (ProcessID, error) {
	if !ValidIdentity(s, MaxIdentityBytes) {
		return "", rootIssue("expected a process ID of 1 to %d bytes without whitespace, control characters or separators", MaxIdentityBytes)
	}
	return ProcessID(s), nil
}

// identity adds an issue at path unless s is a valid identity.
func (l *issueList) identity(path []string, s string, max int) {
	if !ValidIdentity(s, max) {
		l.add(path, "expected an identity of 1 to %d bytes without whitespace, control characters or separators", max)
	}
}

//go:build !ballet_testforge

package gitforge

import "github.com/ballet/ballet/internal/forge"

// TestBuild reports whether this is a test build (the ballet_testforge
// build tag), whose plain-git forge Ballet merges on.
const TestBuild = false

// ForBuild is the plain-git forge of this build: Forge, on which a human
// merges. A build with the ballet_testforge tag (only the failure suite and
// the restart test make one) returns Merging instead.
func ForBuild(cacheDir string) forge.Forge { return New(cacheDir) }

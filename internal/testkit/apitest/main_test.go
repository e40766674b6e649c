package apitest_test

import (
	goflag "flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// parallel is how many of the package's tests run at once unless
// -test.parallel says otherwise. Every test builds a world of its own (a
// store, a Core on its own port) and spends most of its time waiting on it
// (rqlited, the agent CLIs, HTTP round trips), not on the CPU: one test at
// a time, the package took four minutes on two cores. Two, not more: the
// failure suite runs beside it (make test starts both first), and with
// four at once its tickets did not settle within its limit on a loaded
// machine (a full run, 2026-12-06); two was as fast as six in an A/B of
// ten of these tests.
const parallel = 2

func TestMain(m *testing.M) {
	goflag.Parse()
	given := false
	goflag.Visit(func(f *goflag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = goflag.Set("test.parallel", strconv.Itoa(max(parallel, runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}

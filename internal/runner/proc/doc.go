// Package proc runs an agent session as a process the runner fully
// controls, and cleans up after runners that died.
//
// A session is one command in its own session and process group (setsid:
// the group can be signalled as a whole, and no controlling terminal is
// inherited), killed by the kernel when the runner dies (Pdeathsig), with
// stdin /dev/null, exactly the environment it is given plus the marker
// BALLET_SESSION=<id>, and a working directory. Its stdout is read as lines
// (NDJSON for the agent CLIs) by a reader that survives lines of tens of MB
// and cuts, marks and carries on past a configured cap; each line goes to a
// callback.
//
// A session ends by itself (its exit code or signal) or is stopped: the
// no-output watchdog (nothing printed for Spec.Idle), the hard deadline
// (Spec.Timeout), the bounded wait after the final line (the caller says
// "that was the final line" with Final; the CLIs sometimes hang after it),
// or a cancellation (Stop, or the context). Stopping sends SIGTERM to the
// group, then SIGKILL after Spec.KillGrace. Every one of these timers runs
// on the injected clock. When the command's process has exited, whatever
// is left of its group — and any process still carrying its marker — is
// killed before it is reaped, so a session leaves no process behind.
//
// Processes the kernel does not kill with the runner (the grandchildren
// of a session when the runner is SIGKILLed) are swept at the next start:
// each session is recorded in a state file (Spec.StateDir) naming the
// runner's PID and start time and the session's process group, and Sweep
// kills the processes of sessions whose runner is gone — only those whose
// environment carries the session's marker, and the groups they are in, so
// a reused PID or process group of an unrelated program is never touched.
//
// The package is Linux only (process groups, Pdeathsig, /proc); elsewhere
// Start and Sweep fail.
package proc

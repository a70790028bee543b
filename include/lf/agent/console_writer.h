#pragma once
// The agent's console output, written by a thread of its own. A console that does not read
// (a pipe into a paused `less`, Ctrl-S on a terminal, a stalled log shipper) then blocks that
// thread, never the agent's io thread and so never its heartbeats: a slow console must not
// get a healthy node declared lost. Past a bound of queued bytes, lines are dropped and the
// count said once the console reads again; log files (--log-dir) still get every line.
#include <chrono>
#include <string>

namespace lf::agent {

// Queues `text` (whole lines) for fd; never blocks on the console.
void write_to_console(int fd, std::string text);

// Waits until everything queued is written, or `timeout`; true when drained. Called at exit
// (so the workers' last lines are not lost) and by tests.
bool drain_console(std::chrono::milliseconds timeout);

}  // namespace lf::agent

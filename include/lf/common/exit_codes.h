#pragma once
// lf-train's process exit codes (documented in README.md "Exit codes").
// The agent decides restart-or-stop from a worker's exit code; the launcher
// maps typed exceptions (error.h) onto these in main().
namespace lf {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;        // a bug or an unexpected exception
constexpr int kExitConfig = 2;          // bad command line, YAML, data or model input
constexpr int kExitRendezvous = 10;     // join refused, mismatch between nodes, join timeout
constexpr int kExitNetwork = 11;        // master unreachable, lost connection, link cut
constexpr int kExitTimeout = 12;        // a deadline passed (store wait, barrier, heartbeat)
constexpr int kExitAborted = 13;        // another node failed; this node was told to stop
constexpr int kExitWorkerFailed = 14;   // a local worker failed and no restart is left
constexpr int kExitBackend = 15;        // NCCL / CUDA / Gloo failure inside a worker
constexpr int kExitInterrupted = 130;   // SIGINT / SIGTERM (128 + signal number for others)

}  // namespace lf

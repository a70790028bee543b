#pragma once
// Checks, before a backend starts, that every rank runs the same thing (the NCCL
// library's version): each rank publishes its value in the job's store and
// compares every other rank's. A mismatch becomes one clear BackendError on
// every rank ("rank 3 has NCCL 2.21.5, rank 0 has 2.27.3") instead of a hang or a
// crash inside the library's init.
#include <chrono>
#include <string>

namespace lf::rdzv {
class StoreClient;
}

namespace lf::comm {

// key_prefix: a namespace of this communicator (generation included); what: names the value in
// the message ("NCCL version"); hint: what to check, added to the message. Waits up to
// `timeout` for every rank's value.
void require_same_on_every_rank(rdzv::StoreClient& store, const std::string& key_prefix, int rank, int world_size,
                                const std::string& what, const std::string& value, std::chrono::milliseconds timeout,
                                const std::string& hint = "");

}  // namespace lf::comm

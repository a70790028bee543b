#pragma once
// The job's store for a communicator: the address CommOptions names, else the
// worker environment lf-train launch sets.
#include "lf/comm/communicator.h"
#include "lf/rendezvous/store_client.h"

namespace lf::comm {

rdzv::StoreClient connect_store(const CommOptions& options);

}  // namespace lf::comm

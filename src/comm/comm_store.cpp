#include "comm_store.h"

namespace lf::comm {

rdzv::StoreClient connect_store(const CommOptions& o) {
  return o.store_port ? rdzv::StoreClient(o.store_addr, o.store_port, o.job_id, o.token)
                      : rdzv::StoreClient::from_env();
}

}  // namespace lf::comm

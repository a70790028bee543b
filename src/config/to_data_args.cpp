#include "lf/config/to_data_args.h"

#include "config_schema.h"

namespace lf::config {

DataArgs to_data_args(const TrainConfig& c) {
  DataArgs a;
  for (const KeyDecl& d : config_schema())
    if (d.to_data) d.to_data(c, a);
  return a;
}

}  // namespace lf::config

#pragma once
// Wall-clock time as seconds since the Unix epoch (system_clock): the timestamps that leave the process
// (TensorBoard events, status JSON, Prometheus samples, lock files), where a steady clock means nothing.

namespace lf {

double wall_now();

}  // namespace lf

#pragma once
// `lf-train doctor [CONFIG] [key=value ...] [--all-nodes] [--json]`: preflight checks
// (lf/doctor/doctor.h). Exit 0 when no check FAILs, 2 otherwise.
namespace CLI {
class App;
}

namespace lf {

void add_doctor_command(CLI::App& app);

}  // namespace lf

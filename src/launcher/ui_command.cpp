#include "ui_command.h"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include <csignal>

#include "lf/config/train_config.h"
#include "lf/data/preview_samples.h"
#include "lf/ui/job_page.h"
#include "lf/ui/offline_source.h"

namespace lf {

void add_ui_command(CLI::App& app) {
  struct Options {
    std::string output_dir, addr, log_dir;
    int64_t port = 0;
    std::vector<std::string> config;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("ui", "Serve the live page over a run's output_dir (curves, progress, logs, data "
                                       "preview): lf-train ui OUTPUT_DIR; the running job's page is --ui-port");
  cmd->add_option("output_dir", o->output_dir, "The run's output_dir (trainer_state.json or trainer_log.jsonl)")->required();
  cmd->add_option("--port", o->port, "TCP port (default 0: a free one, printed)")->check(CLI::Range(0, 65535));
  cmd->add_option("--addr", o->addr,
                  "The address to bind (env LF_UI_ADDR; default 127.0.0.1, this host only; another address serves "
                  "the page beyond this host, with a token)");
  cmd->add_option("--log-dir", o->log_dir, "The run's --log-dir: each rank's last lines (its latest attempt)");
  cmd->add_option("--config", o->config, "The run's CONFIG.yaml [key=value ...]: its data preview")
      ->expected(1, -1);
  cmd->callback([o] {
    ui::OfflineOptions oo;
    oo.output_dir = o->output_dir;
    oo.log_dir = o->log_dir;
    if (!o->config.empty()) {
      const std::vector<std::string> overrides(o->config.begin() + 1, o->config.end());
      const auto loaded = config::load_train_config(o->config.front(), overrides);
      oo.preview = [data = loaded.plan.data] { return preview_samples_json(data, 5); };
    }
    boost::asio::io_context io;
    auto po = ui::PageOptions::from_env(static_cast<uint16_t>(o->port));
    if (!o->addr.empty()) po.bind_host = o->addr;
    ui::JobPage page(io, po, ui::make_offline_source(std::move(oo)));
    page.start("the run's page");
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      page.stop();
      io.stop();
    });
    io.run();
  });
}

}  // namespace lf

#include "outputs.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>

#include "lf/common/error.h"

namespace lf::train {
namespace fs = std::filesystem;

std::string format_timedelta(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

TrainerLogWriter::TrainerLogWriter(const fs::path& file) : out_(file, std::ios::app) {
  LF_CHECK(out_.good(), ConfigError, "cannot write {}", file.string());
}

void TrainerLogWriter::write(const nlohmann::ordered_json& line) {
  out_ << line.dump() << "\n";
  out_.flush();
}

void write_json_file(const fs::path& file, const nlohmann::json& obj, int indent) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    LF_CHECK(out.good(), ConfigError, "cannot write {}", tmp.string());
    out << obj.dump(indent) << "\n";  // nlohmann::json keeps keys sorted, as sort_keys=True
  }
  fs::rename(tmp, file);
}

std::vector<double> smooth_curve(const std::vector<double>& values) {
  if (values.empty()) return {};
  const double weight = 1.8 * (1.0 / (1.0 + std::exp(-0.05 * static_cast<double>(values.size()))) - 0.5);
  std::vector<double> out;
  double last = values[0];
  for (double v : values) {
    last = last * weight + (1 - weight) * v;
    out.push_back(last);
  }
  return out;
}

namespace {

// A "nice" tick step (1, 2, 5 x 10^k) for about `n` ticks over `span`.
double tick_step(double span, int n) {
  if (span <= 0) return 1;
  const double raw = span / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string tick_label(double v, double step) {
  if (step >= 1 && std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{}", static_cast<int64_t>(std::round(v)));
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step))));
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

bool plot_curve(const fs::path& png, const std::vector<std::pair<double, double>>& points, const std::string& key,
                const std::string& title) {
  if (points.empty()) return false;
  constexpr int kW = 640, kH = 480;
  constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 55;
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, kW, kH);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);

  std::vector<double> ys;
  for (const auto& p : points) ys.push_back(p.second);
  const auto smoothed = smooth_curve(ys);
  double x0 = points.front().first, x1 = points.back().first;
  double y0 = *std::min_element(ys.begin(), ys.end()), y1 = *std::max_element(ys.begin(), ys.end());
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };

  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 11);
  cairo_set_line_width(cr, 1);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, kLeft, kTop, pw, ph);
  cairo_stroke(cr);
  cairo_text_extents_t ext;
  const double xs = tick_step(x1 - x0, 6), yst = tick_step(y1 - y0, 6);
  for (double t = std::ceil(x0 / xs) * xs; t <= x1 + 1e-9; t += xs) {
    cairo_move_to(cr, px(t), kTop + ph);
    cairo_line_to(cr, px(t), kTop + ph + 4);
    cairo_stroke(cr);
    const auto label = tick_label(t, xs);
    cairo_text_extents(cr, label.c_str(), &ext);
    cairo_move_to(cr, px(t) - ext.width / 2, kTop + ph + 17);
    cairo_show_text(cr, label.c_str());
  }
  for (double t = std::ceil(y0 / yst) * yst; t <= y1 + 1e-12; t += yst) {
    cairo_move_to(cr, kLeft - 4, py(t));
    cairo_line_to(cr, kLeft, py(t));
    cairo_stroke(cr);
    const auto label = tick_label(t, yst);
    cairo_text_extents(cr, label.c_str(), &ext);
    cairo_move_to(cr, kLeft - 7 - ext.width, py(t) + ext.height / 2);
    cairo_show_text(cr, label.c_str());
  }
  auto draw = [&](const std::vector<double>& v, double r, double g, double b, double a, double width) {
    cairo_set_source_rgba(cr, r, g, b, a);
    cairo_set_line_width(cr, width);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i == 0) cairo_move_to(cr, px(points[i].first), py(v[i]));
      else cairo_line_to(cr, px(points[i].first), py(v[i]));
    }
    if (v.size() == 1) cairo_arc(cr, px(points[0].first), py(v[0]), 2, 0, 2 * M_PI);
    cairo_stroke(cr);
  };
  // matplotlib's default colour cycle, as LLaMA-Factory's plot: original (alpha 0.4), smoothed.
  draw(ys, 0.12, 0.47, 0.71, 0.4, 1.5);
  draw(smoothed, 0.12, 0.47, 0.71, 1.0, 1.5);

  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_font_size(cr, 13);
  cairo_text_extents(cr, title.c_str(), &ext);
  cairo_move_to(cr, (kW - ext.width) / 2, kTop - 14);
  cairo_show_text(cr, title.c_str());
  cairo_set_font_size(cr, 12);
  cairo_text_extents(cr, "step", &ext);
  cairo_move_to(cr, kLeft + (pw - ext.width) / 2, kH - 14);
  cairo_show_text(cr, "step");
  cairo_save(cr);
  cairo_text_extents(cr, key.c_str(), &ext);
  cairo_move_to(cr, 18, kTop + (ph + ext.width) / 2);
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, key.c_str());
  cairo_restore(cr);
  // Legend, top right.
  const double lx = kLeft + pw - 110, ly = kTop + 10;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_rectangle(cr, lx, ly, 100, 40);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  const char* names[] = {"original", "smoothed"};
  for (int i = 0; i < 2; ++i) {
    cairo_set_source_rgba(cr, 0.12, 0.47, 0.71, i == 0 ? 0.4 : 1.0);
    cairo_set_line_width(cr, 1.5);
    cairo_move_to(cr, lx + 6, ly + 13 + 16 * i);
    cairo_line_to(cr, lx + 30, ly + 13 + 16 * i);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 11);
    cairo_move_to(cr, lx + 36, ly + 17 + 16 * i);
    cairo_show_text(cr, names[i]);
  }

  cairo_surface_flush(surface);
  const auto status = cairo_surface_write_to_png(surface, png.c_str());
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  LF_CHECK(status == CAIRO_STATUS_SUCCESS, ConfigError, "cannot write {}: {}", png.string(),
           cairo_status_to_string(status));
  return true;
}

}  // namespace lf::train

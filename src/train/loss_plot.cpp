// training_loss.png / training_eval_loss.png as LLaMA-Factory's plot_loss draws them (matplotlib's
// default figure: 640x480, the original curve at alpha 0.4 and the smoothed one over it, a
// legend top right), with cairo: no Python, no matplotlib.
#include <cairo.h>

#include <algorithm>
#include <cmath>

#include "lf/common/error.h"
#include "outputs.h"

namespace lf::train {
namespace fs = std::filesystem;

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

constexpr int kW = 640, kH = 480;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 55;
constexpr double kPw = kW - kLeft - kRight, kPh = kH - kTop - kBottom;  // the plot area

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

// Data coordinates to pixels: x over the points' steps, y over the values with 5% margins.
struct Frame {
  double x0, x1, y0, y1;
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * kPw; }
  double py(double y) const { return kTop + (1 - (y - y0) / (y1 - y0)) * kPh; }
};

Frame frame_of(const std::vector<std::pair<double, double>>& points, const std::vector<double>& ys) {
  Frame f{points.front().first, points.back().first, *std::min_element(ys.begin(), ys.end()),
          *std::max_element(ys.begin(), ys.end())};
  if (f.x1 <= f.x0) f.x1 = f.x0 + 1;
  if (f.y1 <= f.y0) {
    f.y0 -= 0.5;
    f.y1 += 0.5;
  }
  const double pad = (f.y1 - f.y0) * 0.05;
  f.y0 -= pad;
  f.y1 += pad;
  return f;
}

void show_text_at(cairo_t* cr, const std::string& text, double x, double y) {
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, text.c_str());
}

// The box and the ticks with their labels.
void draw_axes(cairo_t* cr, const Frame& f) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 11);
  cairo_set_line_width(cr, 1);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, kLeft, kTop, kPw, kPh);
  cairo_stroke(cr);
  cairo_text_extents_t ext;
  const double xs = tick_step(f.x1 - f.x0, 6), ys = tick_step(f.y1 - f.y0, 6);
  for (double t = std::ceil(f.x0 / xs) * xs; t <= f.x1 + 1e-9; t += xs) {
    cairo_move_to(cr, f.px(t), kTop + kPh);
    cairo_line_to(cr, f.px(t), kTop + kPh + 4);
    cairo_stroke(cr);
    const auto label = tick_label(t, xs);
    cairo_text_extents(cr, label.c_str(), &ext);
    show_text_at(cr, label, f.px(t) - ext.width / 2, kTop + kPh + 17);
  }
  for (double t = std::ceil(f.y0 / ys) * ys; t <= f.y1 + 1e-12; t += ys) {
    cairo_move_to(cr, kLeft - 4, f.py(t));
    cairo_line_to(cr, kLeft, f.py(t));
    cairo_stroke(cr);
    const auto label = tick_label(t, ys);
    cairo_text_extents(cr, label.c_str(), &ext);
    show_text_at(cr, label, kLeft - 7 - ext.width, f.py(t) + ext.height / 2);
  }
}

// matplotlib's first colour (tab:blue) at `alpha`.
void draw_series(cairo_t* cr, const Frame& f, const std::vector<std::pair<double, double>>& points,
                 const std::vector<double>& v, double alpha) {
  cairo_set_source_rgba(cr, 0.12, 0.47, 0.71, alpha);
  cairo_set_line_width(cr, 1.5);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0) cairo_move_to(cr, f.px(points[i].first), f.py(v[i]));
    else cairo_line_to(cr, f.px(points[i].first), f.py(v[i]));
  }
  if (v.size() == 1) cairo_arc(cr, f.px(points[0].first), f.py(v[0]), 2, 0, 2 * M_PI);
  cairo_stroke(cr);
}

// The title, "step" under the x axis, the key along the y axis.
void draw_labels(cairo_t* cr, const std::string& key, const std::string& title) {
  cairo_text_extents_t ext;
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_font_size(cr, 13);
  cairo_text_extents(cr, title.c_str(), &ext);
  show_text_at(cr, title, (kW - ext.width) / 2, kTop - 14);
  cairo_set_font_size(cr, 12);
  cairo_text_extents(cr, "step", &ext);
  show_text_at(cr, "step", kLeft + (kPw - ext.width) / 2, kH - 14);
  cairo_save(cr);
  cairo_text_extents(cr, key.c_str(), &ext);
  cairo_move_to(cr, 18, kTop + (kPh + ext.width) / 2);
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, key.c_str());
  cairo_restore(cr);
}

void draw_legend(cairo_t* cr) {
  const double lx = kLeft + kPw - 110, ly = kTop + 10;
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
    show_text_at(cr, names[i], lx + 36, ly + 17 + 16 * i);
  }
}

}  // namespace

bool plot_curve(const fs::path& png, const std::vector<std::pair<double, double>>& points, const std::string& key,
                const std::string& title) {
  if (points.empty()) return false;
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, kW, kH);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  std::vector<double> ys;
  for (const auto& p : points) ys.push_back(p.second);
  const Frame f = frame_of(points, ys);
  draw_axes(cr, f);
  draw_series(cr, f, points, ys, 0.4);  // original, then smoothed (LLaMA-Factory's plot)
  draw_series(cr, f, points, smooth_curve(ys), 1.0);
  draw_labels(cr, key, title);
  draw_legend(cr);
  cairo_surface_flush(surface);
  const auto status = cairo_surface_write_to_png(surface, png.c_str());
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  LF_CHECK(status == CAIRO_STATUS_SUCCESS, ConfigError, "cannot write {}: {}", png.string(),
           cairo_status_to_string(status));
  return true;
}

}  // namespace lf::train

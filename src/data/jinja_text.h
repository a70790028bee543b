#pragma once
// Python's str methods the Jinja renderer needs (jinja_text.cpp), on UTF-8 text. Case mapping is
// ASCII's (chat templates change the case of role names and keywords, never of other scripts).
#include <optional>
#include <string>
#include <vector>

namespace lf::jinja {

std::vector<std::string> code_points(const std::string& s);  // each UTF-8 character, as Python indexes them
// str.strip / lstrip / rstrip: `chars` unset strips whitespace.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
// str.split(sep, maxsplit) (rsplit when `from_right`); sep unset splits on whitespace runs.
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);

}  // namespace lf::jinja

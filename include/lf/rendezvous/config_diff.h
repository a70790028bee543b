#pragma once
// Names what differs between two nodes' effective configs (JoinMsg::config_items,
// "key=value" each), so a mismatch says which keys and both values, not two hashes.
#include <string>
#include <vector>

namespace lf::rdzv {

// "seed: 1 (node A) vs 2 (node B); learning_rate: 1e-4 vs (not set)", at most `max_keys`
// keys then "and N more". Values of keys that look secret (token, password, secret) are
// never shown. Empty when the items are equal.
std::string describe_config_difference(const std::vector<std::string>& a, const std::string& a_name,
                                       const std::vector<std::string>& b, const std::string& b_name,
                                       size_t max_keys = 8);

// The value to send for a key: secrets travel as a digest only.
std::string config_item(const std::string& key, const std::string& value);

}  // namespace lf::rdzv

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/json_escape.h"
#include "lf/common/remove_tree.h"
#include "lf/common/self_connect.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <unistd.h>

TEST(Check, CarriesTypeMessageAndLocation) {
  try {
    LF_CHECK(1 + 1 == 3, lf::ConfigError, "expected {} got {}", 3, 2);
    FAIL() << "no throw";
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 3 got 2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("common_test.cpp:"), std::string::npos);
    EXPECT_EQ(e.exit_code(), lf::kExitConfig);
  }
}

TEST(Env, IntParsesAndRejectsGarbage) {
  setenv("LF_TEST_INT", "42", 1);
  EXPECT_EQ(lf::env_int("LF_TEST_INT").value(), 42);
  setenv("LF_TEST_INT", "4x", 1);
  EXPECT_THROW(lf::env_int("LF_TEST_INT"), lf::ConfigError);
  unsetenv("LF_TEST_INT");
  EXPECT_FALSE(lf::env_int("LF_TEST_INT").has_value());
}

// Python's json.dumps escapes (what LLaMA-Factory's JSONL files and chat templates' tojson hold),
// read back by a JSON parser to the same bytes.
TEST(JsonEscape, AsPythonsJsonDumpsAndReadsBack) {
  const std::string s = std::string("a\"b\\c\n\r\t\b\f") + char(1) + "é";
  EXPECT_EQ(lf::json_escape(s), "a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001é");
  EXPECT_EQ(nlohmann::json::parse("\"" + lf::json_escape(s) + "\"").get<std::string>(), s);
}

TEST(Hash, Fnv1aKnownValue) {
  EXPECT_EQ(lf::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(lf::hex64(lf::fnv1a64("a")), "af63dc4c8601ec8c");
}

TEST(RemoveTree, DeletesNestedFoldersAndToleratesMissingPaths) {
  auto root = std::filesystem::temp_directory_path() / ("lf-rm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "f.txt") << "x";
  std::ofstream(root / "g.txt") << "y";
  std::filesystem::create_symlink("/etc", root / "link");  // removed, never followed
  EXPECT_TRUE(lf::remove_tree(root));
  EXPECT_FALSE(std::filesystem::exists(root));
  EXPECT_TRUE(std::filesystem::exists("/etc/hostname"));
  EXPECT_TRUE(lf::remove_tree(root));  // already gone
}

// lf/common/self_connect.h: a socket bound to a port and dialled to that same port is the
// kernel's TCP self-connect (what a client gets when its ephemeral port is the server's).
TEST(SelfConnect, ASocketDialledToItsOwnPortIsConnectedToItself) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_TRUE(lf::connected_to_itself(fd));
  ::close(fd);
}

TEST(SelfConnect, AClientOfAListenerIsNot) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(server, 1), 0);
  ASSERT_EQ(::getsockname(server, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_FALSE(lf::connected_to_itself(client));
  EXPECT_FALSE(lf::connected_to_itself(server));  // listening, no peer
  ::close(client);
  ::close(server);
}

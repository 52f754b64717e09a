// Chat workloads (experiments/workload.hpp) without the model: the shipped files parse, a bad
// file names itself and what is wrong (invalid UTF-8 by byte offset), and a config asks for a
// workload only of a model with a tokenizer. Tokenising them needs the model: tests/model/.
#include "experiments/workload.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

using testing::fresh_test_dir;
using ::testing::HasSubstr;
using testing::invalid_input_message;
using testing::run_cli;
using testing::write_text;

TEST(Workload, ShippedWorkloadsLoad) {
  EXPECT_EQ(workload_names(), (std::vector<std::string>{"chat", "rewrite"}));
  for (const std::string& name : workload_names()) {
    const Workload w = load_workload(name);
    EXPECT_EQ(w.name, name);
    EXPECT_FALSE(w.description.empty()) << name;
    ASSERT_FALSE(w.conversations.empty()) << name;
    for (const auto& conversation : w.conversations) {
      ASSERT_FALSE(conversation.empty());
      EXPECT_EQ(conversation.back().role, "user");
      EXPECT_FALSE(conversation.back().content.empty());
    }
  }
}

TEST(Workload, RewritePromptsHoldThePassageToCopy) {
  // Each rewrite request ends with its passage after a blank line: the text the reply copies.
  for (const auto& conversation : load_workload("rewrite").conversations) {
    const std::string& user = conversation.back().content;
    const size_t blank = user.find("\n\n");
    ASSERT_NE(blank, std::string::npos) << user;
    EXPECT_GT(user.size() - blank, 300u) << user;
  }
}

TEST(Workload, UnknownNameListsTheShippedOnes) {
  EXPECT_THAT(invalid_input_message([] { load_workload("no-such-workload"); }),
              HasSubstr("unknown workload \"no-such-workload\""));
  EXPECT_THAT(invalid_input_message([] { load_workload("no-such-workload"); }),
              HasSubstr("known workloads: chat, rewrite"));
}

TEST(Workload, BadFilesNameTheFileAndTheProblem) {
  const auto dir = fresh_test_dir();
  const auto no_user = write_text(dir / "no_user.toml", "[[prompts]]\nsystem = \"hi\"\n");
  EXPECT_THAT(invalid_input_message([&] { load_workload(no_user.string()); }),
              HasSubstr("no_user.toml:1:1: prompt 0 has no user text"));
  const auto unknown = write_text(dir / "unknown.toml", "[[prompts]]\nuser = \"a\"\nusr = \"b\"\n");
  EXPECT_THAT(invalid_input_message([&] { load_workload(unknown.string()); }),
              HasSubstr("unknown.toml:3:7: unknown key prompts.usr; expected system or user"));
  const auto empty = write_text(dir / "empty.toml", "description = \"nothing\"\n");
  EXPECT_THAT(invalid_input_message([&] { load_workload(empty.string()); }),
              HasSubstr("empty.toml: no [[prompts]]"));
  // "caf" then a lead byte 0xC3 followed by '(' instead of a continuation byte.
  const std::string text = "[[prompts]]\nuser = \"caf\xC3(\"\n";
  const auto bad = write_text(dir / "bad_utf8.toml", text);
  EXPECT_THAT(invalid_input_message([&] { load_workload(bad.string()); }),
              HasSubstr("bad_utf8.toml: invalid UTF-8 at byte offset " +
                        std::to_string(text.find('\xC3'))));
  EXPECT_THAT(invalid_input_message([&] { load_workload((dir / "absent.toml").string()); }),
              HasSubstr("absent.toml cannot be read"));
}

TEST(Workload, ConfigNeedsATokenizerForWorkloadPrompts) {
  const auto dir = fresh_test_dir();
  const auto config = write_text(dir / "lsm.toml",
                                 "[target]\nmodel = \"lsm-tiny-target\"\n[decode]\n"
                                 "prompt_source = \"workload:rewrite\"\n");
  const testing::CliRun r = run_cli("validate '" + config.string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("decode.prompt_source is \"workload:rewrite\" but target.model "
                                  "\"lsm-tiny-target\" has no tokenizer"));
  const auto unknown = write_text(dir / "unknown.toml",
                                  "[target]\nmodel = \"lsm-tiny-target\"\n[decode]\n"
                                  "prompt_source = \"workload:nope\"\n");
  const testing::CliRun u = run_cli("validate '" + unknown.string() + "'");
  EXPECT_EQ(u.status, 2) << u.output;
  EXPECT_THAT(u.output, HasSubstr("unknown.toml:4:17: decode.prompt_source is \"workload:nope\"; "
                                  "expected one of: random, corpus, workload:chat, "
                                  "workload:rewrite"));
}

}  // namespace
}  // namespace speclab::experiments

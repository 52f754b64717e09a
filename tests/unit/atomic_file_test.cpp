// Unit tests of core/io/atomic_file: the one write-then-rename path of every file speclab writes.
// A committed file carries its bytes under its name and leaves no .partial; an uncommitted one
// leaves nothing and never touches what is already there; every failure names the path, the step
// and the partial file.
#include "core/io/atomic_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using speclab::testing::fresh_test_dir;
using speclab::testing::read_text;
using speclab::testing::write_text;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string io_error_message(const auto& action) { return testing::error_of<IoError>(action); }

TEST(AtomicFile, CommitGivesTheBytesTheirNameAndLeavesNoPartial) {
  const fs::path path = fresh_test_dir() / "out.csv";
  {
    AtomicFile file(path);
    file.write("a,b\n");
    file.write("1,2\n");
    EXPECT_FALSE(fs::exists(path)) << "the name appears only at commit";
    EXPECT_TRUE(fs::exists(partial_path(path)));
    file.commit();
  }
  EXPECT_EQ(read_text(path), "a,b\n1,2\n");
  EXPECT_FALSE(fs::exists(partial_path(path)));
}

TEST(AtomicFile, UncommittedLeavesTheOldFileAndNoPartial) {
  const fs::path path = write_text(fresh_test_dir() / "summary.csv", "old results\n");
  {
    AtomicFile file(path);
    file.write("half a new file");
  }  // e.g. an exception before commit
  EXPECT_EQ(read_text(path), "old results\n");
  EXPECT_FALSE(fs::exists(partial_path(path)));
}

TEST(AtomicFile, CommitReplacesTheOldFile) {
  const fs::path path = write_text(fresh_test_dir() / "summary.csv", "old\n");
  AtomicFile file(path);
  file.write("new\n");
  file.commit();
  EXPECT_EQ(read_text(path), "new\n");
}

TEST(AtomicFile, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  const fs::path path = fresh_test_dir() / "no such dir" / "out.csv";
  EXPECT_THAT(io_error_message([&] { AtomicFile file(path); }),
              AllOf(HasSubstr(path.string() + ": cannot create '" + partial_path(path).string()),
                    HasSubstr("No such file or directory")));
}

TEST(CommitPartial, RenamesAClosedPartialFile) {
  const fs::path path = fresh_test_dir() / "model.gguf";
  write_text(partial_path(path), "weights");
  commit_partial(path);
  EXPECT_EQ(read_text(path), "weights");
  EXPECT_FALSE(fs::exists(partial_path(path)));
}

TEST(CommitPartial, MissingPartialIsAnIoErrorAndTheOldFileStays) {
  const fs::path path = write_text(fresh_test_dir() / "model.gguf", "old weights");
  EXPECT_THAT(
      io_error_message([&] { commit_partial(path); }),
      HasSubstr(path.string() + ": cannot reopen to fsync '" + partial_path(path).string() + "'"));
  EXPECT_EQ(read_text(path), "old weights");
}

TEST(CommitPartial, RenameFailureIsAnIoErrorAndKeepsThePartial) {
  // A non-empty directory under the final name: rename(2) cannot replace it.
  const fs::path path = fresh_test_dir() / "taken";
  fs::create_directories(path / "inside");
  write_text(partial_path(path), "bytes");
  EXPECT_THAT(io_error_message([&] { commit_partial(path); }),
              HasSubstr(path.string() + ": cannot rename onto '" + partial_path(path).string()));
  EXPECT_TRUE(fs::is_directory(path / "inside"));
  EXPECT_EQ(read_text(partial_path(path)), "bytes") << "the caller decides what to remove";
}

}  // namespace
}  // namespace speclab

// Chat workloads (data/workloads/NAME.toml): conversations whose assistant reply a real model
// writes, formatted with the model's ChatML template and tokenised with the byte-level BPE of its
// vocabulary (core/models/tokenizer.hpp), as prompts for `speclab bench decode --workload` and
// `decode.prompt_source = "workload:NAME"` (experiments/README.md "Workloads").
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/tokenizer.hpp"

namespace speclab::experiments {

/// A workload file: `description`, then one or more `[[prompts]]` with `user` (the request) and
/// an optional `system` (default: the chat template's own system message).
struct Workload {
  std::string name;  ///< the file's stem
  std::filesystem::path path;
  std::string description;
  std::vector<std::vector<ChatMessage>> conversations;  ///< one per [[prompts]] entry
};

/// data/workloads/ of the source tree, or $SPECLAB_WORKLOADS.
std::filesystem::path workloads_dir();
/// The names of the shipped workloads (stems of workloads_dir()/*.toml), sorted.
std::vector<std::string> workload_names();

/// Loads a workload by name (workloads_dir()/NAME.toml) or by path (anything with a '/' or ending
/// in ".toml"). InvalidInput naming the file (and FILE:LINE:COLUMN for TOML errors), listing the
/// known names for an unknown one, for a missing or empty `user`, an unknown key, or invalid
/// UTF-8 (by byte offset).
Workload load_workload(std::string_view name_or_path);

/// A model's tokenizer and context length (GGUF `<architecture>.context_length`).
struct ChatTokenizer {
  BpeTokenizer tokenizer;
  int64_t context_length = 0;
  std::string model;  ///< the model name it was made for
};

/// The tokenizer of `model`'s vocabulary (core/models/model_registry.hpp tokenizer_file()).
/// InvalidInput when the model has no tokenizer (bytes or synthetic ids) or its file is absent.
ChatTokenizer chat_tokenizer(std::string_view model);

/// Token ids of one conversation in ChatML with the assistant prompt appended. InvalidInput
/// naming `what` and the byte offset of invalid UTF-8, and when the prompt plus `max_new_tokens`
/// does not fit the model's context (naming both lengths).
std::vector<int32_t> tokenize_conversation(const ChatTokenizer& t,
                                           std::span<const ChatMessage> conversation,
                                           int64_t max_new_tokens, std::string_view what);

/// `count` prompts: conversation j mod n of the workload, tokenised as above.
std::vector<std::vector<int32_t>> workload_prompts(const Workload& workload, std::string_view model,
                                                   int64_t count, int64_t max_new_tokens);

}  // namespace speclab::experiments

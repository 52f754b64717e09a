// Chat workloads (see workload.hpp).
#include "experiments/workload.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/base/source_tree.hpp"
#include "core/io/gguf.hpp"
#include "core/models/model_registry.hpp"
#include "experiments/config.hpp"

namespace speclab::experiments {

namespace fs = std::filesystem;

fs::path workloads_dir() {
  if (const char* env = std::getenv("SPECLAB_WORKLOADS"); env != nullptr && *env != '\0') {
    return env;
  }
  return source_tree_path("data/workloads");
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(workloads_dir(), ec)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Workload load_workload(std::string_view name_or_path) {
  const bool is_path =
      name_or_path.find('/') != std::string_view::npos || name_or_path.ends_with(".toml");
  Workload w;
  w.path =
      is_path ? fs::path(name_or_path) : workloads_dir() / fmt::format("{}.toml", name_or_path);
  w.name = w.path.stem().string();
  std::ifstream in(w.path, std::ios::binary);
  if (!in) {
    if (is_path)
      throw InvalidInput(fmt::format("workload file {} cannot be read", w.path.string()));
    throw InvalidInput(fmt::format("unknown workload \"{}\" (no {}); known workloads: {}",
                                   name_or_path, w.path.string(),
                                   fmt::join(workload_names(), ", ")));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  check_utf8(text, fmt::format("workload file {}", w.path.string()));
  toml::table root;
  try {
    root = toml::parse(text, w.path.string());
  } catch (const toml::parse_error& e) {
    throw InvalidInput(fmt::format("{}:{}:{}: {}", w.path.string(), e.source().begin.line,
                                   e.source().begin.column, e.description()));
  }
  const auto where = [&](const toml::node& node) {
    return fmt::format("{}:{}:{}", w.path.string(), node.source().begin.line,
                       node.source().begin.column);
  };
  for (const auto& [key, node] : root) {
    if (key.str() != "description" && key.str() != "prompts") {
      throw InvalidInput(fmt::format("{}: unknown key {}; expected description and [[prompts]]",
                                     where(node), key.str()));
    }
  }
  w.description = root["description"].value_or(std::string());
  const toml::array* prompts = root["prompts"].as_array();
  if (prompts == nullptr || prompts->empty()) {
    throw InvalidInput(fmt::format(
        "{}: no [[prompts]]; expected at least one table with user = \"...\"", w.path.string()));
  }
  for (const toml::node& entry : *prompts) {
    const toml::table* table = entry.as_table();
    if (table == nullptr) {
      throw InvalidInput(fmt::format("{}: prompts holds {}; expected tables [[prompts]]",
                                     where(entry), render_value(entry)));
    }
    std::vector<ChatMessage> conversation;
    for (const auto& [key, node] : *table) {
      if (key.str() != "system" && key.str() != "user") {
        throw InvalidInput(fmt::format("{}: unknown key prompts.{}; expected system or user",
                                       where(node), key.str()));
      }
      if (!node.is_string()) {
        throw InvalidInput(fmt::format("{}: prompts.{} is {}; expected a string", where(node),
                                       key.str(), render_value(node)));
      }
    }
    const auto user = (*table)["user"].value<std::string>();
    if (!user || user->empty()) {
      throw InvalidInput(fmt::format("{}: prompt {} has no user text; expected user = \"...\"",
                                     where(entry), w.conversations.size()));
    }
    if (const auto system = (*table)["system"].value<std::string>()) {
      conversation.push_back({"system", *system});
    }
    conversation.push_back({"user", *user});
    w.conversations.push_back(std::move(conversation));
  }
  return w;
}

ChatTokenizer chat_tokenizer(std::string_view model) {
  const fs::path file = tokenizer_file(model);
  if (file.empty()) {
    throw InvalidInput(fmt::format(
        "model \"{}\" has no tokenizer (its tokens are bytes or synthetic ids); chat workloads "
        "need a model with one, such as smollm2-135m",
        model));
  }
  const GgufFile gguf = GgufFile::open(file);
  const std::string arch = gguf.get_string("general.architecture");
  return ChatTokenizer{BpeTokenizer(gguf), gguf.get_int(arch + ".context_length"),
                       std::string(model)};
}

std::vector<int32_t> tokenize_conversation(const ChatTokenizer& t,
                                           std::span<const ChatMessage> conversation,
                                           int64_t max_new_tokens, std::string_view what) {
  for (const ChatMessage& m : conversation) {
    check_utf8(m.content, fmt::format("{} ({} message)", what, m.role));
  }
  const std::string text = t.tokenizer.apply_chat_template(conversation);
  std::vector<int32_t> ids = t.tokenizer.encode(text);
  const auto length = static_cast<int64_t>(ids.size());
  if (length + max_new_tokens > t.context_length) {
    throw InvalidInput(fmt::format(
        "{} is {} tokens in the chat template; with {} new tokens that is {}, more than the "
        "context of {} ({} tokens); shorten the prompt or generate fewer tokens",
        what, length, max_new_tokens, length + max_new_tokens, t.model, t.context_length));
  }
  return ids;
}

std::vector<std::vector<int32_t>> workload_prompts(const Workload& workload, std::string_view model,
                                                   int64_t count, int64_t max_new_tokens) {
  const ChatTokenizer t = chat_tokenizer(model);
  std::vector<std::vector<int32_t>> tokenized;
  for (size_t j = 0; j < workload.conversations.size(); ++j) {
    tokenized.push_back(
        tokenize_conversation(t, workload.conversations[j], max_new_tokens,
                              fmt::format("workload {} prompt {}", workload.path.string(), j)));
  }
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t j = 0; j < count; ++j) prompts.push_back(tokenized[j % tokenized.size()]);
  return prompts;
}

}  // namespace speclab::experiments

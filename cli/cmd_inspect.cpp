// `speclab inspect FILE.h5`: prints a result file's attributes (the resolved config last) and its
// datasets with type, shape and storage, and the values of small ones.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/io/hdf5_file.hpp"

namespace speclab::cli {
namespace {

constexpr int64_t kMaxShownValues = 16;

struct InspectArgs {
  std::string file;
  bool json = false;
};

std::string attribute_text(const Hdf5Reader& reader, const std::string& name) {
  switch (reader.attribute_kind(name)) {
    case Hdf5AttributeKind::kString:
      return fmt::format("\"{}\"", reader.read_string_attribute(name));
    case Hdf5AttributeKind::kSigned:
      return fmt::format("{}", reader.read_attribute<int64_t>(name));
    case Hdf5AttributeKind::kUnsigned:
      return fmt::format("{}", reader.read_attribute<uint64_t>(name));
    case Hdf5AttributeKind::kFloat:
      return fmt::format("{}", reader.read_attribute<double>(name));
    case Hdf5AttributeKind::kOther:
      break;
  }
  return "(not a scalar number or string)";
}

Json attribute_json(const Hdf5Reader& reader, const std::string& name) {
  switch (reader.attribute_kind(name)) {
    case Hdf5AttributeKind::kString:
      return reader.read_string_attribute(name);
    case Hdf5AttributeKind::kSigned:
      return reader.read_attribute<int64_t>(name);
    case Hdf5AttributeKind::kUnsigned:
      return reader.read_attribute<uint64_t>(name);
    case Hdf5AttributeKind::kFloat:
      return reader.read_attribute<double>(name);
    case Hdf5AttributeKind::kOther:
      break;
  }
  return nullptr;
}

// {"file", "attributes": {name: value}, "datasets": [{"name", "dtype", "shape"}]}: every
// attribute, the resolved config (config_toml) among them.
void print_json(const Hdf5Reader& reader, const std::string& file) {
  Json attributes = Json::object(), datasets = Json::array();
  for (const std::string& name : reader.attribute_names()) {
    attributes[name] = attribute_json(reader, name);
  }
  for (const std::string& name : reader.dataset_names()) {
    const Hdf5DatasetInfo info = reader.dataset_info(name);
    datasets.push_back({{"name", name}, {"dtype", info.dtype}, {"shape", info.shape}});
  }
  print_json_line({{"file", file}, {"attributes", attributes}, {"datasets", datasets}});
}

void inspect(const InspectArgs& args) {
  const Hdf5Reader reader(args.file);
  if (args.json) return print_json(reader, args.file);
  if (quiet()) return;
  std::printf("%s\n", args.file.c_str());
  if (reader.has_attribute("schema")) {
    std::printf("  schema %s", attribute_text(reader, "schema").c_str());
    if (reader.has_attribute("schema_version")) {
      std::printf(" version %s", attribute_text(reader, "schema_version").c_str());
    }
    std::printf("\n");
  }
  std::printf("attributes:\n");
  for (const std::string& name : reader.attribute_names()) {
    if (name == "config_toml" || name == "schema" || name == "schema_version") continue;
    // A metric's units (units.NAME, a run file's) go beside its value rather than on a line of
    // their own.
    if (name.starts_with("units.") && reader.has_attribute(name.substr(6))) continue;
    const std::string units = "units." + name;
    std::printf("  %-28s %s%s\n", name.c_str(), attribute_text(reader, name).c_str(),
                reader.has_attribute(units)
                    ? fmt::format("  {}", reader.read_string_attribute(units)).c_str()
                    : "");
  }
  std::printf("datasets:\n");
  for (const std::string& name : reader.dataset_names()) {
    const Hdf5DatasetInfo info = reader.dataset_info(name);
    int64_t count = 1;
    for (const int64_t d : info.shape) count *= d;
    std::string storage;
    if (info.chunked) storage += " chunked";
    if (info.deflate) storage += " deflate";
    if (info.extendable) storage += " extendable";
    std::string values;
    if (count <= kMaxShownValues && info.dtype != "string") {
      if (info.dtype.starts_with("float")) {
        values = fmt::format("  {}", fmt::join(reader.read<double>(name).values, ", "));
      } else if (info.dtype.find("int") != std::string::npos && info.dtype != "uint64") {
        values = fmt::format("  {}", fmt::join(reader.read<int64_t>(name).values, ", "));
      }
    }
    std::printf("  %-34s %-8s %-10s%s%s\n", name.c_str(), info.dtype.c_str(),
                format_shape(info.shape).c_str(), storage.c_str(), values.c_str());
  }
  if (reader.has_attribute("config_toml")) {
    std::printf("config_toml:\n%s", reader.read_string_attribute("config_toml").c_str());
  }
}

void setup_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a result file's attributes and datasets");
  document_exit_statuses(*cmd, {{2, "bad input: the file is missing or not HDF5"}});
  auto args = std::make_shared<InspectArgs>();
  cmd->add_option("file", args->file, "HDF5 file")->required();
  cmd->add_flag("--json", args->json, "print one JSON object: attributes and datasets");
  cmd->callback([args] { inspect(*args); });
}

const CommandRegistrar kRegistrar{"inspect", &setup_inspect};

}  // namespace
}  // namespace speclab::cli

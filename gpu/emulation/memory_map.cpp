// What an address is, for the emulation's messages and argument checks: the host object an
// address points into (AddressSanitizer's own description of heap chunks, stacks and globals where
// it runs; /proc/self/maps otherwise), and the name of the function at an address (the ELF
// symbol table of the object that contains it), so a failure names its kernel.
#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "gpu/emulation/runtime_state.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
extern "C" int __sanitizer_get_ownership(const volatile void* p);
#endif

namespace speclab::emulation::detail {
namespace {

std::string hex(uintptr_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

#if !defined(__SANITIZE_ADDRESS__)
// The mapping of /proc/self/maps that contains `address`, if it is writable host memory.
std::string writable_mapping(uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long begin = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &begin, &end, perms) != 3) continue;
    if (address < begin || address >= end) continue;
    if (perms[0] != 'r' || perms[1] != 'w') return {};
    const size_t slash = line.find_first_of("/[");
    return slash == std::string::npos ? "anonymous mapping" : line.substr(slash);
  }
  return {};
}
#endif

struct ObjectSpan {
  std::string file;
  uintptr_t bias = 0;
  bool found = false;
};

int find_object(dl_phdr_info* info, size_t, void* data) {
  auto* query = static_cast<std::pair<uintptr_t, ObjectSpan>*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (query->first >= begin && query->first < begin + ph.p_memsz) {
      query->second.file = info->dlpi_name != nullptr && info->dlpi_name[0] != 0 ? info->dlpi_name
                                                                                 : "/proc/self/exe";
      query->second.bias = info->dlpi_addr;
      query->second.found = true;
      return 1;
    }
  }
  return 0;
}

// The FUNC symbol of `file` whose [value, value + size) holds `offset`: .symtab, else .dynsym.
std::string symbol_at(const std::string& file, uintptr_t offset) {
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string name;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > sizeof(ElfW(Ehdr))) {
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto* base = static_cast<const unsigned char*>(map);
      const auto size = static_cast<size_t>(st.st_size);
      const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
      const bool elf = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
                       eh->e_shoff + eh->e_shnum * sizeof(ElfW(Shdr)) <= size;
      for (const unsigned type : {unsigned{SHT_SYMTAB}, unsigned{SHT_DYNSYM}}) {
        if (!elf || !name.empty()) break;
        const auto* sections = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
        for (unsigned s = 0; s < eh->e_shnum && name.empty(); ++s) {
          const ElfW(Shdr)& sh = sections[s];
          if (sh.sh_type != type || sh.sh_link >= eh->e_shnum) continue;
          const ElfW(Shdr)& strings = sections[sh.sh_link];
          if (sh.sh_offset + sh.sh_size > size || strings.sh_offset + strings.sh_size > size) {
            continue;
          }
          const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(base + sh.sh_offset);
          const size_t n = sh.sh_size / sizeof(ElfW(Sym));
          for (size_t i = 0; i < n; ++i) {
            const ElfW(Sym)& sym = symbols[i];
            if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_name >= strings.sh_size) continue;
            if (offset >= sym.st_value && offset < sym.st_value + (sym.st_size ? sym.st_size : 1)) {
              name = reinterpret_cast<const char*>(base + strings.sh_offset + sym.st_name);
              break;
            }
          }
        }
      }
      munmap(map, size);
    }
  }
  close(fd);
  return name;
}

}  // namespace

std::string host_memory_kind(uintptr_t address) {
  // Below the lowest mappable page or above the 47-bit user address space: a number, never an
  // address (most of a struct's sizes, floats and seeds end here without a look-up).
  if (address < 65536 || address >= (uintptr_t{1} << 47) || is_device_address(address)) return {};
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer knows every live heap chunk (its bounds), every thread's stack and every
  // instrumented global, so a word that merely looks like an address is not mistaken for one.
  char name[128] = {};
  void* region = nullptr;
  size_t region_size = 0;
  const char* kind = __asan_locate_address(reinterpret_cast<void*>(address), name, sizeof name,
                                           &region, &region_size);
  if (kind == nullptr) return {};
  const auto begin = reinterpret_cast<uintptr_t>(region);
  if (std::strcmp(kind, "heap") == 0) {
    if (region == nullptr || address < begin || address > begin + region_size ||
        __sanitizer_get_ownership(region) == 0) {
      return {};
    }
    return "host heap (inside a live " + std::to_string(region_size) + "-byte allocation at " +
           hex(begin) + ")";
  }
  if (std::strcmp(kind, "stack") == 0) return "host stack";
  if (std::strcmp(kind, "global") == 0) {
    return std::string("host global") + (name[0] != 0 ? std::string(" '") + name + "'" : "");
  }
  return {};
#else
  const std::string mapping = writable_mapping(address);
  return mapping.empty() ? std::string() : "host memory (" + mapping + ")";
#endif
}

std::string function_name(const void* address) {
  static std::mutex mutex;
  static std::map<const void*, std::string> cache;
  std::lock_guard lock(mutex);
  const auto it = cache.find(address);
  if (it != cache.end()) return it->second;
  std::pair<uintptr_t, ObjectSpan> query{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(find_object, &query);
  std::string name;
  if (query.second.found) name = symbol_at(query.second.file, query.first - query.second.bias);
  if (!name.empty()) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) name = demangled;
    std::free(demangled);
  } else {
    name = hex(reinterpret_cast<uintptr_t>(address));
  }
  cache.emplace(address, name);
  return name;
}

}  // namespace speclab::emulation::detail

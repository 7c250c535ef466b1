// elf_symbols.cpp — a symbol's bytes in an ELF file, with LLVM's object library.
//
// The symbol's file offset is its section's offset plus (symbol value − section
// address); the bytes are bounded by the symbol's section (and by the file, which
// LLVM checks when it hands out section contents). `__tvm_dev_mblob` starts with a u64
// length: exactly 8 + length bytes are returned, checked against the section.
#include "kdflow/formats/elf_symbols.h"

#include <fmt/format.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBufferRef.h>

#include <optional>

namespace kdflow {
namespace {

/// LLVM's message for `e` (consumed), on one line.
std::string message_of(llvm::Error e) {
  std::string text = llvm::toString(std::move(e));
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

struct Found {
  uint64_t value = 0;
  uint64_t size = 0;
  llvm::object::ELFSectionRef section;
};

/// Looks `symbol` up among `symbols`; the first defined match wins. Errors name `file`.
template <class Range>
Expected<std::optional<Found>> find_symbol(Range symbols, const llvm::object::ObjectFile& obj, const std::string& file,
                                           const std::string& symbol) {
  for (llvm::object::ELFSymbolRef sym : symbols) {
    llvm::Expected<llvm::StringRef> name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());  // an unreadable name cannot be the one we want
      continue;
    }
    if (*name != symbol) continue;
    llvm::Expected<llvm::object::section_iterator> sec = sym.getSection();
    if (!sec) return file_error(file, "symbol \"" + symbol + "\": " + message_of(sec.takeError()));
    if (*sec == obj.section_end()) continue;  // undefined or absolute: not this one
    llvm::Expected<uint64_t> value = sym.getAddress();
    if (!value) return file_error(file, "symbol \"" + symbol + "\": " + message_of(value.takeError()));
    return std::optional<Found>(Found{*value, sym.getSize(), llvm::object::ELFSectionRef(**sec)});
  }
  return std::optional<Found>();
}

}  // namespace

Expected<std::string> read_elf_symbol(std::string_view bytes, const std::string& file, const std::string& symbol) {
  llvm::MemoryBufferRef ref(llvm::StringRef(bytes.data(), bytes.size()), file);
  if (bytes.size() < 4 || bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4))
    return file_error(file, "not an ELF file (no \\x7fELF magic)");
  llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> obj = llvm::object::ObjectFile::createObjectFile(ref);
  if (!obj) return file_error(file, "not a valid ELF file: " + message_of(obj.takeError()));
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
  if (!elf) return file_error(file, "not an ELF file");

  // LLVM counts a symbol table's entries from its section header alone: a corrupt size
  // would have us iterate billions of unreadable entries. Check the tables lie in the file.
  for (const llvm::object::ELFSectionRef sec : elf->sections()) {
    if (sec.getType() != llvm::ELF::SHT_SYMTAB && sec.getType() != llvm::ELF::SHT_DYNSYM) continue;
    llvm::Expected<llvm::StringRef> contents = sec.getContents();
    if (!contents) return file_error(file, "not a valid ELF file: its symbol table: " + message_of(contents.takeError()));
  }
  // The static symbol table first, then the dynamic one (a stripped library keeps only the latter).
  auto found = find_symbol(elf->symbols(), *elf, file, symbol);
  if (!found) return found.error();
  if (!*found) {
    found = find_symbol(elf->getDynamicSymbolIterators(), *elf, file, symbol);
    if (!found) return found.error();
  }
  if (!*found)
    return file_error(file, "no symbol \"" + symbol + "\"" +
                                (symbol == "__tvm_dev_mblob" ? " (not a library written by TVM's export_library?)" : ""));
  const Found& f = **found;
  if (f.section.getType() == llvm::ELF::SHT_NOBITS)
    return file_error(file, "symbol \"" + symbol + "\" lies in a section without file contents");
  uint64_t sec_addr = f.section.getAddress(), sec_size = f.section.getSize();
  if (f.value < sec_addr || f.value - sec_addr > sec_size)
    return file_error(file, fmt::format("symbol \"{}\" (address {:#x}) lies outside its section ({:#x}..{:#x})", symbol,
                                        f.value, sec_addr, sec_addr + sec_size));
  uint64_t start = f.value - sec_addr, room = sec_size - start;
  llvm::Expected<llvm::StringRef> contents = f.section.getContents();
  if (!contents) return file_error(file, "symbol \"" + symbol + "\": its section: " + message_of(contents.takeError()));
  if (contents->size() != sec_size)
    return file_error(file, "symbol \"" + symbol + "\": its section's contents are truncated");

  uint64_t size = f.size;
  if (symbol == "__tvm_dev_mblob") {
    if (room < 8)
      return file_error(file, fmt::format("symbol \"{}\" lies outside its section: its u64 length needs 8 bytes, {} left",
                                          symbol, room));
    uint64_t len = 0;
    for (int k = 0; k < 8; ++k)
      len |= static_cast<uint64_t>(static_cast<unsigned char>((*contents)[start + k])) << (8 * k);
    if (len > room - 8)
      return file_error(file, fmt::format("symbol \"{}\" says its blob is {} bytes long, but its section holds only {} "
                                          "more bytes",
                                          symbol, len, room - 8));
    size = 8 + len;
    if (f.size != 0 && size > f.size)
      return file_error(file, fmt::format("symbol \"{}\" says its blob is {} bytes long, but the symbol is only {} bytes",
                                          symbol, len, f.size));
  } else if (size > room) {
    return file_error(file, fmt::format("symbol \"{}\" ({} bytes) lies outside its section ({} bytes left)", symbol,
                                        size, room));
  }
  return std::string(contents->data() + start, size);
}

}  // namespace kdflow

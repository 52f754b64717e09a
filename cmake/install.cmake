# `cmake --install`: headers under include/speclab/, the libraries, the speclab executable, and a
# speclabConfig.cmake so that an outside project can
#   find_package(speclab REQUIRED)                     # speclab::verify
#   find_package(speclab REQUIRED COMPONENTS core gpu)  # and speclab::core, speclab::gpu
# Each component is its own export set, so speclab::verify needs only fmt and OpenMP.
include(CMakePackageConfigHelpers)
set(SPECLAB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/speclab)

# Headers are reached as an installed package's are, <speclab/core/verify/verifier.hpp>: the
# install tree's include/ is the only include directory a consumer gets, and the headers' own
# includes of each other ("core/...", "gpu/...") are rewritten to the same prefix as they are
# installed (below), so no bare core/ or gpu/ path can clash with another package's headers.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/speclab
        FILES_MATCHING PATTERN "*.hpp")
install(TARGETS speclab_verify EXPORT speclabVerifyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS speclab_core EXPORT speclabCoreTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT speclabVerifyTargets NAMESPACE speclab:: DESTINATION ${SPECLAB_CMAKE_DIR})
install(EXPORT speclabCoreTargets NAMESPACE speclab:: DESTINATION ${SPECLAB_CMAKE_DIR})
set(SPECLAB_COMPONENTS verify core)
if(SPECLAB_CUDA_ENABLED)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/gpu DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/speclab
          FILES_MATCHING PATTERN "*.hpp" PATTERN "emulation" EXCLUDE)
  install(TARGETS speclab_gpu EXPORT speclabGpuTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT speclabGpuTargets NAMESPACE speclab:: DESTINATION ${SPECLAB_CMAKE_DIR})
  list(APPEND SPECLAB_COMPONENTS gpu)
endif()
install(CODE "
  file(GLOB_RECURSE speclab_headers \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/speclab/*.hpp\")
  foreach(header IN LISTS speclab_headers)
    file(READ \"\${header}\" text)
    string(REGEX REPLACE \"#include \\\"(core|gpu)/\" \"#include \\\"speclab/\\\\1/\" text \"\${text}\")
    file(WRITE \"\${header}\" \"\${text}\")
  endforeach()")
install(TARGETS speclab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The Python modules the executable runs (`speclab plot`: speclab.plot, `speclab report`:
# speclab.report, with speclab.io; none needs the compiled extension), where it looks for them
# relative to itself: PREFIX/bin/speclab -> PREFIX/share/speclab/python/speclab/
# (experiments/project_files.hpp python_module_command). The whole package with its extension is
# `pip install .` (pyproject.toml).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/speclab
        DESTINATION ${CMAKE_INSTALL_DATADIR}/speclab/python FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/speclabConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/speclabConfig.cmake
                              INSTALL_DESTINATION ${SPECLAB_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/speclabConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/speclabConfig.cmake
              ${PROJECT_BINARY_DIR}/speclabConfigVersion.cmake
        DESTINATION ${SPECLAB_CMAKE_DIR})

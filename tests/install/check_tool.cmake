# Installs the build BUILD into a fresh prefix outside the source tree, then uses PREFIX/bin/speclab
# as a user who put it on PATH would (ctest: Install.InstalledToolRunsPlotsAndReports): a small
# sweep (tests/data/tiny_sweep.toml) run from a directory of its own, its figures drawn by the
# installed Python helpers (PREFIX/share/speclab/python), its HTML report written by the installed
# report helper, and, with those helpers removed, `speclab plot` and `speclab report` failing with exit status 2 naming where
# they looked — no copy in a source tree stands in for them.
string(RANDOM LENGTH 8 ALPHABET abcdefghijklmnopqrstuvwxyz0123456789 suffix)
set(work /tmp/speclab-install-tool-${suffix})
set(prefix ${work}/prefix)
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work}/user)
file(COPY_FILE ${CMAKE_CURRENT_LIST_DIR}/../data/tiny_sweep.toml ${work}/user/tiny.toml)

# run(EXPECTED_STATUS OUTPUT_VARIABLE COMMAND...): in the user's directory, without SPECLAB_SOURCE.
function(run expected out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=SPECLAB_SOURCE ${ARGN}
                  WORKING_DIRECTORY ${work}/user RESULT_VARIABLE status OUTPUT_VARIABLE stdout
                  ERROR_VARIABLE stderr)
  message("${ARGN}\n${stdout}${stderr}")
  if(NOT status EQUAL expected)
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "installed tool: '${ARGN}' exited ${status}; expected ${expected}")
  endif()
  set(${out} "${stdout}${stderr}" PARENT_SCOPE)
endfunction()

run(0 ignored ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(file bin/speclab share/speclab/python/speclab/plot.py share/speclab/python/speclab/io.py
             share/speclab/python/speclab/report.py share/speclab/python/speclab/__init__.py)
  if(NOT EXISTS ${prefix}/${file})
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "installed tool: ${prefix}/${file} was not installed")
  endif()
endforeach()
run(0 ignored ${prefix}/bin/speclab run tiny.toml --out run)
run(0 output ${prefix}/bin/speclab plot run -o figures)
foreach(figure tiny_position_acceptance tiny_emitted_vs_gamma tiny_alpha_vs_temperature
               tiny_speedup_vs_gamma)
  if(NOT EXISTS ${work}/user/figures/${figure}.png)
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "installed tool: speclab plot wrote no ${figure}.png:\n${output}")
  endif()
endforeach()
run(0 output ${prefix}/bin/speclab report run -o report.html)
file(READ ${work}/user/report.html page)
# (The match stops before the ';' of "data:image/png;base64,", which a CMake list would split.)
string(REGEX MATCHALL "<img [^>]*src=\"data:image/png" images "${page}")
list(LENGTH images n_images)
if(NOT n_images EQUAL 5 OR NOT page MATCHES "decode.gamma" OR NOT page MATCHES "cpu_isa")
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "installed tool: report.html holds ${n_images} inline figures (expected 5), "
                      "or lacks the summary table or the machine:\n${output}")
endif()
file(REMOVE_RECURSE ${prefix}/share/speclab/python)
run(2 output ${prefix}/bin/speclab plot run -o figures2)
if(NOT output MATCHES "share/speclab/python/speclab/__init__.py")
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "installed tool: without its helpers plot should name where it looked:\n${output}")
endif()
run(2 output ${prefix}/bin/speclab report run -o report2.html)
if(NOT output MATCHES "share/speclab/python/speclab/__init__.py")
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "installed tool: without its helpers report should name where it looked:\n${output}")
endif()
file(REMOVE_RECURSE ${work})

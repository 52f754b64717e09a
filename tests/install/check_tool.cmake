# Installs the build BUILD into a fresh prefix outside the source tree, then uses PREFIX/bin/speclab
# as a user who put it on PATH would (ctest: Install.InstalledToolRunsAndPlots): a small sweep run
# from a directory of its own, its figures drawn by the installed Python helpers
# (PREFIX/share/speclab/python), and, with those helpers removed, `speclab plot` failing with exit
# status 2 naming where it looked — no copy in a source tree stands in for them.
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
foreach(file bin/speclab share/speclab/python/speclab_plot.py share/speclab/python/speclab_io.py)
  if(NOT EXISTS ${prefix}/${file})
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "installed tool: ${prefix}/${file} was not installed")
  endif()
endforeach()
run(0 ignored ${prefix}/bin/speclab run tiny.toml --out run)
run(0 output ${prefix}/bin/speclab plot run -o figures)
foreach(figure tiny_position_acceptance tiny_emitted_vs_gamma tiny_alpha_vs_temperature)
  if(NOT EXISTS ${work}/user/figures/${figure}.png)
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "installed tool: speclab plot wrote no ${figure}.png:\n${output}")
  endif()
endforeach()
file(REMOVE_RECURSE ${prefix}/share/speclab/python)
run(2 output ${prefix}/bin/speclab plot run -o figures2)
if(NOT output MATCHES "share/speclab/python/speclab_plot.py")
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "installed tool: without its helpers plot should name where it looked:\n${output}")
endif()
file(REMOVE_RECURSE ${work})

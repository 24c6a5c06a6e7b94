# The HTML run report (brisk report, and the one brisk train writes): pages, errors, and with
# headless Chromium a screenshot whose chart regions must not be blank (skipped without it).
add_test(NAME cli.report COMMAND ${CMAKE_CURRENT_LIST_DIR}/report.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_report
  ${CMAKE_SOURCE_DIR})
add_test(NAME cli.report_screenshot COMMAND ${CMAKE_CURRENT_LIST_DIR}/report.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/cli_report_screenshot ${CMAKE_SOURCE_DIR} screenshot)
set_tests_properties(cli.report cli.report_screenshot PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
set_tests_properties(cli.report_screenshot PROPERTIES SKIP_RETURN_CODE 77)

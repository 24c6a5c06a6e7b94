# The image tests encode their own JPEG, 16-bit and RGBA PNG inputs with the libraries
# brisk decodes with; without a library its cases are skipped (and brisk's own error for
# the missing format is what they check instead).
foreach(t data_test_image data_test_image_dataset data_test_image_labels_json)
  if(TARGET ${t})
    if(PNG_FOUND)
      target_link_libraries(${t} PRIVATE PNG::PNG)
      target_compile_definitions(${t} PRIVATE BRISK_HAVE_PNG=1)
    endif()
    if(JPEG_FOUND)
      target_link_libraries(${t} PRIVATE JPEG::JPEG)
      target_compile_definitions(${t} PRIVATE BRISK_HAVE_JPEG=1)
    endif()
  endif()
endforeach()

# Install rules of the registry library (QR_INSTALL): the archive, the public headers (see
# be/src/util/CMakeLists.txt), a CMake package and a pkg-config file. What a consumer gets:
#   find_package(query_registry 0.2 CONFIG REQUIRED)  -> query_registry::registry
#   pkg-config --cflags --libs query_registry
# The daemon's binaries have their own install rules (be/src/service). Versions 0.x promise
# compatibility within a minor version only, hence SameMinorVersion: 0.2 accepts 0.2.y.
include(CMakePackageConfigHelpers)

set(QR_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/query_registry)

install(EXPORT query_registryTargets
  NAMESPACE query_registry::
  FILE query_registryTargets.cmake
  DESTINATION ${QR_CMAKE_INSTALL_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/query_registryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/query_registryConfig.cmake
  INSTALL_DESTINATION ${QR_CMAKE_INSTALL_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/query_registryConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/query_registryConfig.cmake
  ${PROJECT_BINARY_DIR}/query_registryConfigVersion.cmake
  DESTINATION ${QR_CMAKE_INSTALL_DIR})

# pkg-config: absolute include/lib dirs are used as they are, relative ones below ${prefix}.
# ${prefix} is found from where the .pc file is (${pcfiledir}), not written in at configure
# time, so that `cmake --install --prefix DIR` (README's way) gives a .pc that points into DIR.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(QR_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH qr_pc_up "/qr-prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/qr-prefix")
  string(REGEX REPLACE "/$" "" qr_pc_up "${qr_pc_up}")
  set(QR_PC_PREFIX "\${pcfiledir}/${qr_pc_up}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(QR_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(QR_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(QR_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(QR_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/query_registry.pc.in
               ${PROJECT_BINARY_DIR}/query_registry.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/query_registry.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

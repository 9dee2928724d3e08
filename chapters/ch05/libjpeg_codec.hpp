// ch05/jpeg_decode's CPU codec: libjpeg (libjpeg-turbo) encoding the example's images and
// decoding them, in memory, with libjpeg's errors turned into a message instead of exit().
#pragma once

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

namespace ch05 {

constexpr int kJpegComponents = 3;  // RGB

// libjpeg reports an error by calling error_exit, which by default ends the process; this one
// keeps the message and jumps back to the call, which throws it (no C++ object lives in between).
struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};
inline void keep_message_and_return(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  info->err->format_message(info, error->message);
  std::longjmp(error->back, 1);
}

// Baseline JPEG, quality 90, every component at full resolution (4:4:4): chroma upsampling
// filters differ between decoders, full-resolution chroma leaves only IDCT and colour rounding.
inline bool encode(const uint8_t* rgb, int height, int width, unsigned char** bytes,
                   unsigned long* size, JpegError& error) {
  jpeg_compress_struct c{};
  c.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = keep_message_and_return;
  if (setjmp(error.back)) {
    jpeg_destroy_compress(&c);
    return false;
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, bytes, size);
  c.image_width = width;
  c.image_height = height;
  c.input_components = kJpegComponents;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  for (int i = 0; i < kJpegComponents; ++i)
    c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgb) + size_t{c.next_scanline} * width * kJpegComponents;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return true;
}

// Decodes one JPEG to interleaved RGB (libjpeg's default accurate integer IDCT).
inline bool decode(const std::vector<uint8_t>& jpeg, uint8_t* rgb, int height, int width,
                   JpegError& error) {
  jpeg_decompress_struct d{};
  d.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = keep_message_and_return;
  if (setjmp(error.back)) {
    jpeg_destroy_decompress(&d);
    return false;
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg.data(), jpeg.size());
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&d);
  if (int(d.output_width) != width || int(d.output_height) != height) {
    std::snprintf(error.message, sizeof error.message, "decoded %ux%u, expected %dx%d",
                  d.output_width, d.output_height, width, height);
    jpeg_destroy_decompress(&d);
    return false;
  }
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = rgb + size_t{d.output_scanline} * width * kJpegComponents;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return true;
}

inline void decode_or_throw(const std::vector<uint8_t>& jpeg, uint8_t* rgb, int height, int width) {
  JpegError error{};
  if (!decode(jpeg, rgb, height, width, error))
    throw std::runtime_error(std::string("libjpeg: ") + error.message);
}
inline std::vector<uint8_t> encode_or_throw(const uint8_t* rgb, int height, int width) {
  unsigned char* bytes = nullptr;
  unsigned long size = 0;
  JpegError error{};
  const bool encoded = encode(rgb, height, width, &bytes, &size, error);
  std::vector<uint8_t> jpeg;
  if (encoded) jpeg.assign(bytes, bytes + size);
  std::free(bytes);  // jpeg_mem_dest's buffer
  if (!encoded) throw std::runtime_error(std::string("libjpeg: ") + error.message);
  return jpeg;
}

}  // namespace ch05

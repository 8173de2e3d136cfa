// Behavioural model of the Lattice ECP5 DP16KD block RAM, for simulation only, limited to
// the configurations pentegg.rtl.bram (RegisteredRAM, SinglePortRAM) and
// pentegg.rtl.evaluator.sliced (SlicedRAM) instantiate:
//   * both ports 9 bits wide (DATA_WIDTH_A = DATA_WIDTH_B = 9): 2048 words, word address in
//     AD*[13:3] (AD*[2:0] unused);
//   * both ports 18 bits wide: 1024 words, word address in AD*[13:4], AD*[1:0] the byte
//     enables of a write (bits 8:0 and 17:9; AD*[3:2] unused);
//   * both ports 36 bits wide (pseudo dual port): 512 words, port A writes, port B reads,
//     word address in AD*[13:5], ADA[3:0] the byte enables of a write (bits 9k+8:9k),
//     write data {DIB, DIA}, read data {DOB, DOA}, REGMODE_A = REGMODE_B;
//   * WRITEMODE NORMAL (a write does not change the port's read data), chip selects and
//     CSDECODE 0, resets tied low, clocks not inverted;
//   * REGMODE "NOREG" (read data from the RAM's read register) or "OUTREG" (through one more
//     register, enabled by OCE);
//   * contents starting at zero, or (18-bit mode) from INITVAL_00..3F, 16 words per 320-bit
//     row, word i in bits [20i+17:20i] (the packing of Yosys's
//     techlibs/lattice/brams_map_16kd.v, init_slice).
// A read of an address in the cycle the other port writes it gives X (no_rw_check).
`timescale 1ns/1ps
module DP16KD #(
  parameter integer DATA_WIDTH_A = 18,
  parameter integer DATA_WIDTH_B = 18,
  parameter REGMODE_A = "NOREG",
  parameter REGMODE_B = "NOREG",
  parameter RESETMODE = "SYNC",
  parameter ASYNC_RESET_RELEASE = "SYNC",
  parameter CSDECODE_A = "0b000",
  parameter CSDECODE_B = "0b000",
  parameter WRITEMODE_A = "NORMAL",
  parameter WRITEMODE_B = "NORMAL",
  parameter GSR = "ENABLED",
  parameter [319:0] INITVAL_00 = 0, parameter [319:0] INITVAL_01 = 0,
  parameter [319:0] INITVAL_02 = 0, parameter [319:0] INITVAL_03 = 0,
  parameter [319:0] INITVAL_04 = 0, parameter [319:0] INITVAL_05 = 0,
  parameter [319:0] INITVAL_06 = 0, parameter [319:0] INITVAL_07 = 0,
  parameter [319:0] INITVAL_08 = 0, parameter [319:0] INITVAL_09 = 0,
  parameter [319:0] INITVAL_0A = 0, parameter [319:0] INITVAL_0B = 0,
  parameter [319:0] INITVAL_0C = 0, parameter [319:0] INITVAL_0D = 0,
  parameter [319:0] INITVAL_0E = 0, parameter [319:0] INITVAL_0F = 0,
  parameter [319:0] INITVAL_10 = 0, parameter [319:0] INITVAL_11 = 0,
  parameter [319:0] INITVAL_12 = 0, parameter [319:0] INITVAL_13 = 0,
  parameter [319:0] INITVAL_14 = 0, parameter [319:0] INITVAL_15 = 0,
  parameter [319:0] INITVAL_16 = 0, parameter [319:0] INITVAL_17 = 0,
  parameter [319:0] INITVAL_18 = 0, parameter [319:0] INITVAL_19 = 0,
  parameter [319:0] INITVAL_1A = 0, parameter [319:0] INITVAL_1B = 0,
  parameter [319:0] INITVAL_1C = 0, parameter [319:0] INITVAL_1D = 0,
  parameter [319:0] INITVAL_1E = 0, parameter [319:0] INITVAL_1F = 0,
  parameter [319:0] INITVAL_20 = 0, parameter [319:0] INITVAL_21 = 0,
  parameter [319:0] INITVAL_22 = 0, parameter [319:0] INITVAL_23 = 0,
  parameter [319:0] INITVAL_24 = 0, parameter [319:0] INITVAL_25 = 0,
  parameter [319:0] INITVAL_26 = 0, parameter [319:0] INITVAL_27 = 0,
  parameter [319:0] INITVAL_28 = 0, parameter [319:0] INITVAL_29 = 0,
  parameter [319:0] INITVAL_2A = 0, parameter [319:0] INITVAL_2B = 0,
  parameter [319:0] INITVAL_2C = 0, parameter [319:0] INITVAL_2D = 0,
  parameter [319:0] INITVAL_2E = 0, parameter [319:0] INITVAL_2F = 0,
  parameter [319:0] INITVAL_30 = 0, parameter [319:0] INITVAL_31 = 0,
  parameter [319:0] INITVAL_32 = 0, parameter [319:0] INITVAL_33 = 0,
  parameter [319:0] INITVAL_34 = 0, parameter [319:0] INITVAL_35 = 0,
  parameter [319:0] INITVAL_36 = 0, parameter [319:0] INITVAL_37 = 0,
  parameter [319:0] INITVAL_38 = 0, parameter [319:0] INITVAL_39 = 0,
  parameter [319:0] INITVAL_3A = 0, parameter [319:0] INITVAL_3B = 0,
  parameter [319:0] INITVAL_3C = 0, parameter [319:0] INITVAL_3D = 0,
  parameter [319:0] INITVAL_3E = 0, parameter [319:0] INITVAL_3F = 0
) (
  input DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6,
  input DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
  input ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0,
  input CEA, OCEA, CLKA, WEA, RSTA, CSA2, CSA1, CSA0,
  output DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6,
  output DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
  input DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6,
  input DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
  input ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0,
  input CEB, OCEB, CLKB, WEB, RSTB, CSB2, CSB1, CSB0,
  output DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6,
  output DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
  wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8,
                     DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
  wire [17:0] dib = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8,
                     DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
  wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3,
                     ADA2, ADA1, ADA0};
  wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3,
                     ADB2, ADB1, ADB0};
  localparam W9 = DATA_WIDTH_A == 9;  // 2048 words of 9 bits
  localparam W36 = DATA_WIDTH_A == 36;  // 512 words of 36 bits
  reg [35:0] mem [0:2047];
  reg [35:0] lat_a, lat_b, out_a, out_b;
  wire [35:0] rd_b = REGMODE_B == "OUTREG" ? out_b : lat_b;
  wire [17:0] doa = W36 ? rd_b[17:0] : (REGMODE_A == "OUTREG" ? out_a[17:0] : lat_a[17:0]);
  wire [17:0] dob = W36 ? rd_b[35:18] : rd_b[17:0];
  assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6,
          DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = doa;
  assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6,
          DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob;

  wire [320*64-1:0] init = {
    INITVAL_3F, INITVAL_3E, INITVAL_3D, INITVAL_3C, INITVAL_3B, INITVAL_3A, INITVAL_39,
    INITVAL_38, INITVAL_37, INITVAL_36, INITVAL_35, INITVAL_34, INITVAL_33, INITVAL_32,
    INITVAL_31, INITVAL_30, INITVAL_2F, INITVAL_2E, INITVAL_2D, INITVAL_2C, INITVAL_2B,
    INITVAL_2A, INITVAL_29, INITVAL_28, INITVAL_27, INITVAL_26, INITVAL_25, INITVAL_24,
    INITVAL_23, INITVAL_22, INITVAL_21, INITVAL_20, INITVAL_1F, INITVAL_1E, INITVAL_1D,
    INITVAL_1C, INITVAL_1B, INITVAL_1A, INITVAL_19, INITVAL_18, INITVAL_17, INITVAL_16,
    INITVAL_15, INITVAL_14, INITVAL_13, INITVAL_12, INITVAL_11, INITVAL_10, INITVAL_0F,
    INITVAL_0E, INITVAL_0D, INITVAL_0C, INITVAL_0B, INITVAL_0A, INITVAL_09, INITVAL_08,
    INITVAL_07, INITVAL_06, INITVAL_05, INITVAL_04, INITVAL_03, INITVAL_02, INITVAL_01,
    INITVAL_00};
  integer i, k;
  initial begin
    if (DATA_WIDTH_A != DATA_WIDTH_B ||
        !(DATA_WIDTH_A == 9 || DATA_WIDTH_A == 18 || DATA_WIDTH_A == 36) ||
        (DATA_WIDTH_A != 18 && init != 0) || (W36 && REGMODE_A != REGMODE_B) ||
        WRITEMODE_A != "NORMAL" || WRITEMODE_B != "NORMAL") begin
      $display("DP16KD model: unsupported configuration");
      $finish;
    end
    #0;
    for (i = 0; i < 2048; i = i + 1) mem[i] = i < 1024 ? {18'b0, init[20 * i +: 18]} : 36'b0;
  end

  // word addresses, and each port's byte (9-bit) write enables
  wire [10:0] wa = W9 ? ada[13:3] : W36 ? {2'b0, ada[13:5]} : {1'b0, ada[13:4]};
  wire [10:0] wb = W9 ? adb[13:3] : W36 ? {2'b0, adb[13:5]} : {1'b0, adb[13:4]};
  wire [3:0] be_a = W9 ? 4'b0001 : W36 ? ada[3:0] : {2'b00, ada[1:0]};
  wire [3:0] be_b = W9 ? 4'b0001 : W36 ? 4'b0000 : {2'b00, adb[1:0]};
  wire [35:0] din_a = W36 ? {dib, dia} : {18'b0, dia};
  wire [35:0] din_b = {18'b0, dib};
  wire wr_a = CEA && WEA && be_a != 0;
  wire wr_b = CEB && WEB && be_b != 0;
  always @(posedge CLKA) begin
    if (CEA && !WEA && !W36) lat_a <= (wr_b && wb == wa) ? 36'bx : mem[wa];
    if (OCEA) out_a <= lat_a;
    if (wr_a)
      for (k = 0; k < 4; k = k + 1)
        if (be_a[k]) mem[wa][9 * k +: 9] <= din_a[9 * k +: 9];
  end
  always @(posedge CLKB) begin
    if (CEB && !WEB) lat_b <= (wr_a && wa == wb) ? 36'bx : mem[wb];
    if (OCEB) out_b <= lat_b;
    if (wr_b)
      for (k = 0; k < 4; k = k + 1)
        if (be_b[k]) mem[wb][9 * k +: 9] <= din_b[9 * k +: 9];
  end
endmodule
